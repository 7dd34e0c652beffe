#!/usr/bin/env bash
# H200 session 22, run 2: what executing a secondary command buffer costs this driver on the GPU
# (run 1: the resident reference's GPU time rose 21 % with one secondary per step). `texstream
# bench commands`: a chain of small dependent dispatches recorded every run against secondaries
# executed in several ways.
set -u
cd "$(dirname "$0")/../../.."
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
mkdir -p /tmp/bin && xz -dc .devbin/texstream.xz > /tmp/bin/ts && chmod +x /tmp/bin/ts
for n in 512 4096; do /tmp/bin/ts bench commands --dispatches $n --runs 20 > $OUT/commands_$n.txt 2>&1; done
cat $OUT/commands_*.txt
