#!/usr/bin/env bash
# Session 42, run 4: the convolution kernel tests on the card at 4daa852's tree. `kernel_conv`
# (.dev41/kc.xz): every case against an f64 reference, every other dense case with an input
# scale, every tensor-core tile forced, and the coverage assertion with the 2^18-unit depthwise
# case that run 3 lacked; `kernel_conv_transpose` (.dev41/kct.xz): conv_transpose2d_plain.comp's
# first run on a GPU.
set -u
cd "$(dirname "$0")/../../.."
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
W=/tmp/s42r4; B=/tmp/s42bin4; mkdir -p $B $W
for b in kc kct; do xz -dc .dev41/$b.xz > $B/$b; done; chmod +x $B/*
nvidia-smi --query-gpu=name,driver_version --format=csv > $W/gpu.txt 2>&1
timeout 120 $B/kc --test-threads=4 > $W/kernel_conv.txt 2>&1; echo "rc $?" >> $W/kernel_conv.txt
timeout 60 $B/kct > $W/kernel_conv_transpose.txt 2>&1; echo "rc $?" >> $W/kernel_conv_transpose.txt
tar czf $OUT/d.tgz -C $W .
cat $W/gpu.txt; grep -hE "^test |test result|^rc" $W/kernel_conv.txt $W/kernel_conv_transpose.txt
