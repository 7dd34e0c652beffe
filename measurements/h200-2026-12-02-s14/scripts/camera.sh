#!/usr/bin/env bash
# H200 session 14, run 6: the product path (the engine streaming weights under a cap) with the
# cooperative-matrix convolutions and warm re-plans: `texstream run workloads/camera-ocr.ron
# --iterations 12 --all-policies --resident-reference` at the workload's default 13 MiB cap.
# Carries .gl, .devbin (texstream.xz, the OCR models xz-compressed in ocr/) and
# models/images/page.png. Outputs: $OUT/c.tgz.
set -u
cd "$(dirname "$0")/../../.."
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
R=/tmp/r; rm -rf $R /tmp/w; mkdir -p $R/workloads $R/models/ocr $R/models/images /tmp/w /tmp/bin
xz -dc .devbin/texstream.xz > /tmp/bin/texstream && chmod +x /tmp/bin/texstream
for m in det cls rec; do xz -dc .devbin/ocr/$m.onnx.xz > $R/models/ocr/$m.onnx; done
cp models/images/page.png $R/models/images/
cp workloads/camera-ocr.ron $R/workloads/
( cd $R && timeout 400 /tmp/bin/texstream run workloads/camera-ocr.ron --iterations 12 --all-policies --resident-reference --metrics-json /tmp/w/camera.json ) > /tmp/w/camera.txt 2>&1
echo "rc $?" >> /tmp/w/camera.txt
tar czf $OUT/c.tgz -C /tmp/w .
grep -v "^\s*$" /tmp/w/camera.txt | tail -45
