#!/usr/bin/env bash
# Session 43, run 4 (502014b, .dev43/ts.xz; no device time left for the assistant's stash):
# the copy probe of 128 copies at a cap that leaves few slots, on the tiny assistant (64 KiB
# pages, models in the tree): the probed page time beside the transfer queue's timestamps.
set -u
cd "$(dirname "$0")/../../.."
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
W=/tmp/r4; mkdir -p /tmp/bin $W; xz -dc .dev43/ts.xz > /tmp/bin/ts; chmod +x /tmp/bin/ts
nvidia-smi --query-gpu=name,driver_version --format=csv > $W/gpu.txt 2>&1
/tmp/bin/ts run workloads/assistant-tiny.ron --cap 1MiB > $W/min.txt 2>&1
b=$(grep -o "at least [0-9]* B" $W/min.txt | head -1 | grep -o "[0-9]*")
/tmp/bin/ts run workloads/assistant-tiny.ron --cap ${b}B > $W/min2.txt 2>&1
m=$(grep -o "minimum feasible cap[^0-9]*[0-9]* B" $W/min2.txt | head -1 | grep -o "[0-9]* B" | grep -o "[0-9]*")
[ -n "$m" ] || m=$b
cap=${CAP:-$(( m + 786432 ))}
echo "bound $b exact $m cap $cap" > $W/caps.txt
timeout 200 /tmp/bin/ts run workloads/assistant-tiny.ron --cap ${cap}B --all-policies --iterations 4 > $W/tiny.txt 2>&1; echo "rc $?" >> $W/tiny.txt
tar czf $OUT/r4.tgz -C $W .
cat $W/gpu.txt $W/caps.txt; grep -E "^rc|policy .*slots|probed|transfer busy|bytes streamed|^(on-demand|lru|planned|preload|resident) " $W/tiny.txt | cut -c1-220
