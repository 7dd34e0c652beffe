#!/usr/bin/env bash
# H200: workload_run four times without the validation layer (dedicated transfer queue); where
# driver tiling pads the OCR activations.
set -u
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
mkdir -p /work && ln -sfn "$PWD" /work/main && mkdir -p target/tmp
mkdir -p /tmp/t && tar xJf devtests.tar.xz -C /tmp/t
export TEXSTREAM_PYTHON=$(command -v python3)
RUST_LOG=texstream=debug .devbin/texstream run workloads/camera-ocr.ron --cap 1MiB > $OUT/padding.log 2>&1
grep -E "needs|arena|Error" $OUT/padding.log | cut -c1-260 > $OUT/padding.txt
( cd vk-backend
for i in 1 2 3 4; do
  start=$(date +%s)
  TEXSTREAM_VALIDATION=0 timeout 100 /tmp/t/workload_run --test-threads=1 > $OUT/noval_$i.log 2>&1
  echo "noval $i: rc $?, $(( $(date +%s) - start )) s, $(grep -c '^test .* ok$' $OUT/noval_$i.log) ok" | tee -a $OUT/summary.txt
done )
