#!/usr/bin/env bash
# Session 43, run 0 (with the last piece of the stash): session 42's never-run run 4, at this
# session's start (3a11301's kernels): `kernel_conv` on the card (every case against an f64
# reference, every other dense case with an input scale, every tensor-core tile forced, the
# coverage assertion with the 2^18-unit depthwise case) and `kernel_conv_transpose`
# (conv_transpose2d_plain.comp's first run on a GPU). Test binaries in .dev43/k.
set -u
cd "$(dirname "$0")/../../.."
bash measurements/h100-2026-12-06-s43/scripts/stash.sh > /dev/null 2>&1
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
W=/tmp/r0; B=/tmp/r0bin; mkdir -p $B $W
for b in kc kct; do xz -dc .dev43/k/$b.xz > $B/$b; done; chmod +x $B/*
nvidia-smi --query-gpu=name,driver_version --format=csv > $W/gpu.txt 2>&1
timeout 150 $B/kc --test-threads=4 > $W/kernel_conv.txt 2>&1; echo "rc $?" >> $W/kernel_conv.txt
timeout 60 $B/kct > $W/kernel_conv_transpose.txt 2>&1; echo "rc $?" >> $W/kernel_conv_transpose.txt
tar czf $OUT/r0.tgz -C $W .
ls /tmp/xfer; cat $W/gpu.txt; grep -hE "^test .*FAIL|test result|^rc|panicked" $W/kernel_conv.txt $W/kernel_conv_transpose.txt | head -20
