#!/usr/bin/env bash
# H200: workload_run with validation and the transfer copies on the compute queue (no dedicated
# transfer queue, so no timeline waits across queues), twice.
set -u
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
mkdir -p /work && ln -sfn "$PWD" /work/main && mkdir -p target/tmp
mkdir -p /tmp/vl && for f in .vl/*.deb; do dpkg -x $f /tmp/vl; done
mkdir -p /tmp/t && tar xJf devtests.tar.xz -C /tmp/t
export TEXSTREAM_PYTHON=$(command -v python3)
cd vk-backend
for i in 1 2; do
  start=$(date +%s)
  ( export VK_LAYER_PATH=/tmp/vl/usr/share/vulkan/explicit_layer.d LD_LIBRARY_PATH=/tmp/vl/usr/lib/x86_64-linux-gnu TEXSTREAM_VALIDATION=1 TEXSTREAM_NO_TRANSFER_QUEUE=1
    timeout 200 /tmp/t/workload_run --test-threads=1 --nocapture ) > $OUT/shared_$i.log 2>&1
  rc=$?
  echo "shared queue + validation $i: rc $rc, $(( $(date +%s) - start )) s, $(grep -c 'Validation Error' $OUT/shared_$i.log) validation messages, $(grep -c '^test .* ok$' $OUT/shared_$i.log) ok" | tee -a $OUT/summary.txt
  grep -E "test result|panicked|stuck|VUID" $OUT/shared_$i.log | head -5 | cut -c1-300 | tee -a $OUT/summary.txt
done
