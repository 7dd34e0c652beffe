#!/usr/bin/env bash
# Session 46, one call after stash.sh has carried q00..q02 (this call carries q03, r00, .gl,
# .dev45/ts.xz (this session's code) and .dev45/ts0.xz (3652614, session 45's)).
# 1) Each image's and buffer's driver bytes on the card (padding.py) and the real assistant's
# minimum feasible cap, with this session's packed copies in their outputs' arena memory and
# (ts0) without; 2) the assistant under every policy at its default 80 MiB, or at the smallest
# whole MiB above the card's minimum when that is under a quarter of its weights (86.75 MiB),
# else 100 MiB; 3) mixed.ron (camera OCR and the assistant under one cap) under every policy at
# the same cap; 4) the interleaved mix (`bench stream`) with what is left. BUDGET (s) bounds it.
set -u
source "$(dirname "$0")/setup.sh"
S=measurements/prepared-2026-12-07-s44/scripts  # padding.py, unchanged since session 44
LOG=texstream_vk::image=debug,texstream::engine::session=info
env RUST_LOG=$LOG timeout 90 /tmp/bin/ts run workloads/assistant.ron --iterations 1 --policy preload --cap 1GiB > $W/pad.txt 2>&1
echo "rc $?" >> $W/pad.txt
$PY $S/padding.py $W/pad.txt > $W/pad_summary.txt 2>&1
MIN=$(grep -oE "minimum feasible [0-9.]+ MiB" $W/pad.txt | tail -1 | grep -oE "[0-9.]+")
CAP=$($PY -c "import math,sys; m=float(sys.argv[1] or 999); print('80MiB' if m<=80 else (f'{math.floor(m)+1}MiB' if math.floor(m)+1<=86.75 else '100MiB'))" "${MIN:-}")
echo "minimum ${MIN:-?} MiB -> cap $CAP" > $W/cap.txt
grep -E '^.(transcript|reply_ids|reply)' $W/pad.txt | cut -c1-300 > $W/outputs.txt; xz -9 $W/pad.txt; save
# The same binary before the packed copies moved into the arena (session 45's code).
env RUST_LOG=$LOG timeout 90 /tmp/bin/ts0 run workloads/assistant.ron --iterations 1 --policy preload --cap 1GiB > $W/pad0.txt 2>&1
echo "rc $?" >> $W/pad0.txt
$PY $S/padding.py $W/pad0.txt > $W/pad0_summary.txt 2>&1
MIN0=$(grep -oE "minimum feasible [0-9.]+ MiB" $W/pad0.txt | tail -1 | grep -oE "[0-9.]+")
grep -E '^.(transcript|reply_ids|reply)' $W/pad0.txt | cut -c1-300 > $W/outputs0.txt; xz -9 $W/pad0.txt
echo "minimum: ${MIN:-?} MiB (this session), ${MIN0:-?} MiB (3652614)" > $W/min.txt; save
# Every policy where the call has the time, else `planned` alone.
if [ "$(left)" -gt 220 ]; then POL="--all-policies --iterations 5"; else POL="--policy planned --iterations 3"; fi
timeout $(( $(left) < 260 ? $(left) - 15 : 240 )) /tmp/bin/ts run workloads/assistant.ron $POL --resident-reference \
  --cap $CAP --metrics-json $W/assistant.json > $W/assistant.txt 2>&1; echo "rc $?" >> $W/assistant.txt
save
if [ -f models/ocr/det.onnx ] && [ "$(left)" -gt 100 ]; then
  timeout $(( $(left) - 15 )) /tmp/bin/ts run workloads/mixed.ron --resident-reference --iterations 11 --cap $CAP \
    --all-policies --metrics-json $W/mixed.json > $W/mixed.txt 2>&1; echo "rc $?" >> $W/mixed.txt
  save
fi
if [ -f models/ocr/det.onnx ] && [ "$(left)" -gt 100 ]; then
  timeout $(( $(left) - 15 )) /tmp/bin/ts bench stream workloads/mixed.ron --arrivals frame=every:100 --arrivals turn=every:1000 \
    --cap $CAP --duration 20 --json $W/stream.json > $W/stream.txt 2>&1; echo "rc $?" >> $W/stream.txt
  save
fi
save
cat $W/gpu.txt $W/xfer.txt $W/cap.txt $W/min.txt; cat $W/outputs.txt $W/outputs0.txt; head -14 $W/pad_summary.txt; head -14 $W/pad0_summary.txt
grep -E "minimum|^rc|^(resident|on-demand|lru|planned|preload|reload)|pipeline|by phase|probed|/LB" $W/assistant.txt | cut -c1-260 | head -40
[ -f $W/mixed.txt ] && grep -E "^rc|^workload|pipeline|/LB|peak" $W/mixed.txt | cut -c1-200 | head -40
[ -f $W/stream.txt ] && tail -15 $W/stream.txt
echo "elapsed $(( $(date +%s) - T0 )) s"
