#!/usr/bin/env bash
# Session 47, a call after run.sh on the machine still held: the assistant at 80 MiB under
# `planned` and `lru` (after a resident reference each) with every stream-journal event logged
# (`RUST_LOG=texstream::stream_journal=trace`: each copy submission's and compute batch's GPU
# span), for journal.py: how the copy and compute queues interleave. BUDGET (s) bounds it.
set -u
source "$(dirname "$0")/setup.sh"
for p in ${POLICIES:-planned lru}; do
  [ "$(left)" -lt 50 ] && break
  RUST_LOG=texstream::stream_journal=trace timeout $(( $(left) - 10 )) /tmp/bin/ts run workloads/assistant.ron \
    --policy $p --resident-reference --iterations 5 --cap 80MiB > $W/j_$p.txt 2>&1
  echo "rc $?" >> $W/j_$p.txt
  grep -vE "stream_journal" $W/j_$p.txt | grep -E "^rc|pipeline turn|/LB|stream a page|GPU stall|^(planned|lru) " | cut -c1-240
  xz -T4 -6 $W/j_$p.txt; save
done
ls -la $W
echo "elapsed $(( $(date +%s) - T0 )) s"
