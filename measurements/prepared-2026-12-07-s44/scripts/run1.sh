#!/usr/bin/env bash
# Session 44, run 1: where the card's extra 30 MiB go (session 43: the assistant's minimum cap
# 93.7 MiB on the H100 against 63.3 on lavapipe). Every image's and buffer's bytes as the driver
# asks them, against their texels (padding.py splits them by model and by shape): with this
# session's folds (a short tensor's one row folded into eight narrower ones where the driver
# says it saves a third), then every policy at the workload's own cap (80 MiB), then the same
# split with stacking off and the minimum cap before (502014b); 100 MiB (session 43's cap)
# where 80 does not fit. BUDGET (s) bounds the call.
set -u
source "$(dirname "$0")/setup.sh"
S=measurements/prepared-2026-12-07-s44/scripts
LOG=texstream_vk::image=debug,texstream::engine::session=info
pad() { # name, env...
  local n=$1; shift
  env "$@" RUST_LOG=$LOG timeout 60 /tmp/bin/ts run workloads/assistant.ron --iterations 1 --policy preload --cap 1GiB > $W/$n.txt 2>&1
  echo "rc $?" >> $W/$n.txt
  $PY $S/padding.py $W/$n.txt > $W/${n}_summary.txt 2>&1; xz -9 $W/$n.txt
}
pad pad_new
save
# Every policy where the call has the time, else `planned` alone.
if [ "$(left)" -gt 200 ]; then POL="--all-policies --iterations 5"; else POL="--policy planned --iterations 3"; fi
timeout $(( $(left) < 240 ? $(left) - 15 : 240 )) /tmp/bin/ts run workloads/assistant.ron $POL --resident-reference \
  --cap 80MiB --metrics-json $W/p80.json > $W/p80.txt 2>&1; echo "rc $?" >> $W/p80.txt
save
[ "$(left)" -gt 50 ] && pad pad_off TEXSTREAM_PAD_SHORT_LAYERS=0
[ "$(left)" -gt 30 ] && { timeout 25 /tmp/bin/ts43 run workloads/assistant.ron --iterations 2 --cap 80MiB > $W/min_before.txt 2>&1; echo "rc $?" >> $W/min_before.txt; }
save
if ! grep -q "^rc 0" $W/p80.txt && [ "$(left)" -gt 100 ]; then
  timeout $(( $(left) - 15 )) /tmp/bin/ts run workloads/assistant.ron --resident-reference --iterations 5 --cap 100MiB \
    --all-policies --metrics-json $W/p100.json > $W/p100.txt 2>&1; echo "rc $?" >> $W/p100.txt
  save
fi
cat $W/gpu.txt $W/xfer.txt; head -12 $W/pad_new_summary.txt; grep -E "^(placing|after)" $W/pad_new_summary.txt $W/pad_off_summary.txt
grep -E "minimum|^rc" $W/min_before.txt | cut -c1-400
grep -E "minimum|^rc|^(resident|on-demand|lru|planned)|by phase|probed" $W/p80.txt | cut -c1-300 | head -30
[ -f $W/p100.txt ] && grep -E "^rc|^(resident|on-demand|lru|planned|preload|reload)|by phase|probed" $W/p100.txt | head -30
echo "elapsed $(( $(date +%s) - T0 )) s"
