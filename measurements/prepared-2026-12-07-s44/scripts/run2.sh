#!/usr/bin/env bash
# Session 44, run 2 (prepared): mixed.ron, the camera OCR pipeline and the assistant under one
# cap with requests interleaved, every policy in one run on the card (issue 13's last GPU row;
# needs r00, the OCR models). At the workload's 80 MiB, else at 100 MiB where 80 does not fit
# (the assistant's minimum on the H100 was 93.7 MiB in session 43); then the interleaved mix
# (`bench stream`, ten frames a turn) where time is left. BUDGET (s) bounds the call.
set -u
source "$(dirname "$0")/setup.sh"
for cap in 80MiB 100MiB; do
  timeout $(( $(left) - 15 )) /tmp/bin/ts run workloads/mixed.ron --resident-reference --iterations 2 --cap $cap \
    --all-policies --metrics-json $W/mixed_$cap.json > $W/mixed_$cap.txt 2>&1; echo "rc $?" >> $W/mixed_$cap.txt
  save
  grep -q "^rc 0" $W/mixed_$cap.txt && break
done
# The interleaved mix (ten frames a turn) at the cap that ran, each policy on a fresh engine.
CAP=$(for c in 80MiB 100MiB; do grep -q "^rc 0" $W/mixed_$c.txt 2>/dev/null && echo $c && break; done)
if [ -n "$CAP" ] && [ "$(left)" -gt 120 ]; then
  timeout $(( $(left) - 15 )) /tmp/bin/ts bench stream workloads/mixed.ron --arrivals frame=every:100 --arrivals turn=every:1000 \
    --cap $CAP --duration $(( ($(left) - 60) / 4 )) --json $W/stream.json > $W/stream.txt 2>&1; echo "rc $?" >> $W/stream.txt
  save
fi
cat $W/gpu.txt $W/xfer.txt; [ -f $W/stream.txt ] && tail -25 $W/stream.txt
for f in $W/mixed_*.txt; do grep -E "minimum|^rc|^(resident|on-demand|lru|planned|preload|reload)|p50|probed" $f | cut -c1-300 | head -40; done
echo "elapsed $(( $(date +%s) - T0 )) s"
