#!/usr/bin/env bash
# Session 52, for the next card (not run: the session's device time was spent): with the
# engine's threads kept off the device's busy interrupt cores by default (`vk_backend::placement`,
# e7cbdea's narrower rule: only the vectors that fire), (1) the real assistant's `planned` at
# 80 MiB with its resident reference, processes alternating between the default placement and
# `TEXSTREAM_THREADS_ANYWHERE=1` (unplaced); (2) `mixed.ron`'s camera frames and the
# assistant's turn under every policy at 80 MiB (session 47's `mixed.sh` commands). Needs the
# OCR models too: carry `.dev45/x/r00` with q03. BUDGET (s) bounds it; (2) gets a third of it.
set -u
source "$(dirname "$0")/../../h100-2026-12-07-s50/scripts/setup.sh"
/tmp/bin/ts devices > $W/devices.txt 2>&1; grep -E "PCI|^#" $W/devices.txt
MIXED_AT=$(( ${BUDGET:-570} / 3 ))
i=0
while [ $(left) -gt $(( MIXED_AT + 20 )) ]; do
  i=$((i + 1))
  for v in placed anywhere; do
    [ $(left) -lt $(( MIXED_AT + 20 )) ] && break
    f=$W/planned$i-$v.txt
    if [ $v = anywhere ]; then export TEXSTREAM_THREADS_ANYWHERE=1; else unset TEXSTREAM_THREADS_ANYWHERE; fi
    timeout $(( $(left) - 5 )) /tmp/bin/ts run workloads/assistant.ron --policy planned --resident-reference \
      --iterations 5 --cap 80MiB > $f 2>&1
    echo "rc $?" >> $f
    echo "== planned $i, $v"; grep -E "runs/LB|host threads|threads \(CPU" $f | cut -c1-300
    save
  done
done
unset TEXSTREAM_THREADS_ANYWHERE
timeout $(( $(left) / 2 )) /tmp/bin/ts run workloads/mixed.ron --resident-reference --iterations 11 --cap 80MiB \
  --all-policies --metrics-json $W/mixed.json > $W/mixed.txt 2>&1; echo "rc $?" >> $W/mixed.txt
save
timeout $(( $(left) - 10 )) /tmp/bin/ts run workloads/mixed.ron --pipeline turn --resident-reference --iterations 3 \
  --cap 80MiB --all-policies --metrics-json $W/mixed_turn.json > $W/mixed_turn.txt 2>&1; echo "rc $?" >> $W/mixed_turn.txt
save
for f in $W/mixed.txt $W/mixed_turn.txt; do grep -E "^rc|^workload|pipeline|/LB|peak|host threads|^(resident|on-demand|lru|planned|preload|reload|least)" $f | cut -c1-220 | head -40; done
echo "elapsed $(( $(date +%s) - T0 )) s"
