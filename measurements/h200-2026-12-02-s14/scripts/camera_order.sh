#!/usr/bin/env bash
# H200 session 14, run 7: run 6's camera-ocr runs with each policy in its own process, in two
# orders (planned, lru, on-demand, then on-demand, lru, planned), to see whether a policy's place
# in `--all-policies` moves its times (in run 6 the CPU steps and the readback grew from the first
# policy to the last). `texstream run workloads/camera-ocr.ron --iterations 12 --policy P` at the
# workload's 13 MiB cap. Carries what run 6 does. Outputs: $OUT/o.tgz.
set -u
cd "$(dirname "$0")/../../.."
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
R=/tmp/r; rm -rf $R /tmp/w; mkdir -p $R/workloads $R/models/ocr $R/models/images /tmp/w /tmp/bin
xz -dc .devbin/texstream.xz > /tmp/bin/texstream && chmod +x /tmp/bin/texstream
for m in det cls rec; do xz -dc .devbin/ocr/$m.onnx.xz > $R/models/ocr/$m.onnx; done
cp models/images/page.png $R/models/images/
cp workloads/camera-ocr.ron $R/workloads/
# Compile the packed models once, outside the timed runs.
( cd $R && timeout 200 /tmp/bin/texstream run workloads/camera-ocr.ron --iterations 1 ) > /tmp/w/warmup.txt 2>&1
k=0
for p in planned lru on-demand on-demand lru planned; do
  k=$((k + 1))
  ( cd $R && timeout 100 /tmp/bin/texstream run workloads/camera-ocr.ron --iterations 12 --policy $p --metrics-json /tmp/w/$k.$p.json ) > /tmp/w/$k.$p.txt 2>&1
  echo "rc $?" >> /tmp/w/$k.$p.txt
done
tar czf $OUT/o.tgz -C /tmp/w .
for f in $(ls /tmp/w/[0-9]*.txt | sort -V); do echo "== $(basename $f)"; grep -E "pipeline frame|^measured|by phase|CPU steps|streamed|peak device|^rc" $f; done
