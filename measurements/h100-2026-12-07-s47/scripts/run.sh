#!/usr/bin/env bash
# Session 47, one call after stash.sh has carried q00..q02 (this call carries q03, r00, .gl,
# .dev45/ts.xz (this session's code: the lower bound of what ran, bounded as one trace per
# request) and .dev45/ts0.xz (cfe7074: the same engine, the bound pro rata of each plan's)).
# 1) The real assistant's minimum feasible cap with per-node scratch shared by shape (cfe7074,
# unmeasured on a card until now) and its outputs; 2) the assistant under every policy at its
# default 80 MiB; 3) `planned` and `lru` again with ts0 (the old accounting of the bound) on the
# same requests. BUDGET (s) bounds it.
set -u
source "$(dirname "$0")/setup.sh"
S=measurements/prepared-2026-12-07-s44/scripts  # padding.py, unchanged since session 44
LOG=texstream_vk::image=debug,texstream::engine::session=info
env RUST_LOG=$LOG timeout 90 /tmp/bin/ts run workloads/assistant.ron --iterations 1 --policy preload --cap 1GiB > $W/pad.txt 2>&1
echo "rc $?" >> $W/pad.txt
$PY $S/padding.py $W/pad.txt > $W/pad_summary.txt 2>&1
MIN=$(grep -oE "minimum feasible [0-9.]+ MiB" $W/pad.txt | tail -1 | grep -oE "[0-9.]+")
echo "minimum ${MIN:-?} MiB" > $W/min.txt
grep -E '^.(transcript|reply_ids|reply)' $W/pad.txt | cut -c1-300 > $W/outputs.txt; xz -9 $W/pad.txt; save
if [ "$(left)" -gt 220 ]; then POL="--all-policies --iterations 5"; else POL="--policy planned --iterations 3"; fi
timeout $(( $(left) < 260 ? $(left) - 15 : 240 )) /tmp/bin/ts run workloads/assistant.ron $POL --resident-reference \
  --cap 80MiB --metrics-json $W/assistant.json > $W/assistant.txt 2>&1; echo "rc $?" >> $W/assistant.txt
save
for p in planned lru; do
  if [ "$(left)" -gt 70 ]; then
    timeout $(( $(left) - 10 )) /tmp/bin/ts0 run workloads/assistant.ron --policy $p --iterations 5 --resident-reference \
      --cap 80MiB > $W/old_$p.txt 2>&1; echo "rc $?" >> $W/old_$p.txt
    save
  fi
done
cat $W/gpu.txt $W/xfer.txt $W/min.txt $W/outputs.txt; head -14 $W/pad_summary.txt
grep -E "minimum|^rc|^(resident|on-demand|lru|planned|preload|reload|least)|pipeline|by phase|probed|/LB|stream a page" $W/assistant.txt | cut -c1-260 | head -40
for f in $W/old_*.txt; do [ -f $f ] && grep -E "^rc|pipeline|/LB|stream a page|re-plans" $f | cut -c1-220; done
echo "elapsed $(( $(date +%s) - T0 )) s"
