#!/usr/bin/env bash
# H200: workload_run with validation three times (the transfer-queue race check), then streaming_run.
set -u
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
mkdir -p /work && ln -sfn "$PWD" /work/main && mkdir -p target/tmp
mkdir -p /tmp/vl && for f in .vl/*.deb; do dpkg -x $f /tmp/vl; done
mkdir -p /tmp/t && tar xJf devtests.tar.xz -C /tmp/t
export VK_LAYER_PATH=/tmp/vl/usr/share/vulkan/explicit_layer.d LD_LIBRARY_PATH=/tmp/vl/usr/lib/x86_64-linux-gnu TEXSTREAM_VALIDATION=1 TEXSTREAM_PYTHON=$(command -v python3)
cd vk-backend
for i in 1 2 3; do
  start=$(date +%s)
  timeout 170 /tmp/t/workload_run --test-threads=1 --nocapture > $OUT/workload_run_$i.log 2>&1
  rc=$?
  echo "workload_run run $i: rc $rc, $(( $(date +%s) - start )) s, $(grep -c 'Validation Error' $OUT/workload_run_$i.log) validation messages, $(grep -c '^test .* ok$' $OUT/workload_run_$i.log) ok, $(grep -c 'FAILED\|panicked' $OUT/workload_run_$i.log) failed" | tee -a $OUT/summary.txt
  grep -E "test result|panicked|stuck|semaphore" $OUT/workload_run_$i.log | head -5 | cut -c1-300 | tee -a $OUT/summary.txt
done
start=$(date +%s)
timeout 120 /tmp/t/streaming_run --test-threads=1 > $OUT/streaming_run.log 2>&1
echo "streaming_run: rc $?, $(( $(date +%s) - start )) s, $(grep -c 'Validation Error' $OUT/streaming_run.log) validation messages" | tee -a $OUT/summary.txt
grep "test result" $OUT/streaming_run.log | tee -a $OUT/summary.txt
