#!/usr/bin/env bash
# H200: the transfer-queue race. workload_run twice without the validation layer, then once with
# it and room for wait_step's two-minute watchdog to report a hang.
set -u
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
mkdir -p /work && ln -sfn "$PWD" /work/main && mkdir -p target/tmp
mkdir -p /tmp/vl && for f in .vl/*.deb; do dpkg -x $f /tmp/vl; done
mkdir -p /tmp/t && tar xJf devtests.tar.xz -C /tmp/t
export TEXSTREAM_PYTHON=$(command -v python3)
cd vk-backend
run() { # name timeout validation
  start=$(date +%s)
  if [ "$3" = 1 ]; then
    ( export VK_LAYER_PATH=/tmp/vl/usr/share/vulkan/explicit_layer.d LD_LIBRARY_PATH=/tmp/vl/usr/lib/x86_64-linux-gnu TEXSTREAM_VALIDATION=1
      timeout $2 /tmp/t/workload_run --test-threads=1 --nocapture ) > $OUT/$1.log 2>&1
  else
    TEXSTREAM_VALIDATION=0 timeout $2 /tmp/t/workload_run --test-threads=1 --nocapture > $OUT/$1.log 2>&1
  fi
  rc=$?
  echo "$1: rc $rc, $(( $(date +%s) - start )) s, $(grep -c 'Validation Error' $OUT/$1.log) validation messages, $(grep -c '^test .* ok$' $OUT/$1.log) ok" | tee -a $OUT/summary.txt
  grep -E "test result|panicked|stuck|semaphore|VUID" $OUT/$1.log | head -5 | cut -c1-400 | tee -a $OUT/summary.txt
}
run noval_1 110 0
run noval_2 110 0
run val_1 260 1
