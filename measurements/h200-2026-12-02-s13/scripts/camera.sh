#!/usr/bin/env bash
# H200 session 13, run 7: the product path (the engine streaming weights under a cap) with the
# new convolutions: `texstream run workloads/camera-ocr.ron --iterations 12 --all-policies
# --resident-reference` at the workload's default 13 MiB cap, with this session's binary and
# with session 12's (texstream.old), each in its own copy of the workload and models (each
# compiles its own .tspk files). Carries .gl and .devbin/bundle.tar.xz (both binaries, the OCR
# models, models/images/page.png). Outputs: $OUT/c.tgz.
set -u
cd "$(dirname "$0")/../../.."
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
B=/tmp/bundle; rm -rf $B /tmp/w; mkdir -p $B /tmp/w
tar -xJf .devbin/bundle.tar.xz -C $B
for bin in texstream texstream.old; do
  R=/tmp/r-$bin; rm -rf $R; mkdir -p $R/workloads; cp -r $B/models $R/models
  cp workloads/camera-ocr.ron $R/workloads/
  ( cd $R && timeout 250 $B/$bin run workloads/camera-ocr.ron --iterations 12 --all-policies --resident-reference --metrics-json /tmp/w/camera.$bin.json ) > /tmp/w/camera.$bin.txt 2>&1
  echo "rc $?" >> /tmp/w/camera.$bin.txt
done
tar czf $OUT/c.tgz -C /tmp/w .
for bin in texstream texstream.old; do echo "== $bin"; grep -v "^\s*$" /tmp/w/camera.$bin.txt | tail -30; done
