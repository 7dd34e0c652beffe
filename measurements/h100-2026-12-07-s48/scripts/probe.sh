#!/usr/bin/env bash
# Session 48, a call after stash.sh has carried q00..q02 (this one carries q03, r00, .gl and
# .dev45/ts.xz): TABLES times the assistant under every policy at 80 MiB after a resident
# reference (the record phase's thread CPU time and context switches now printed), then
# JOURNAL policies (default `planned`) with every stream-journal event logged, compute
# batches with their host submission times, for journal.py. BUDGET (s) bounds it.
set -u
source "$(dirname "$0")/setup.sh"
for i in $(seq 1 ${TABLES:-2}); do
  [ "$(left)" -lt 60 ] && break
  timeout $(( $(left) - 10 )) /tmp/bin/ts run workloads/assistant.ron --all-policies --iterations 5 --resident-reference \
    --cap 80MiB --metrics-json $W/assistant$i.json > $W/assistant$i.txt 2>&1; echo "rc $?" >> $W/assistant$i.txt
  save
  echo "== table $i"; grep -E "^rc|^(resident|on-demand|lru|planned|least)|model runs by phase" $W/assistant$i.txt | cut -c1-260
done
for p in ${JOURNAL:-planned}; do
  [ "$(left)" -lt 50 ] && break
  RUST_LOG=texstream::stream_journal=trace timeout $(( $(left) - 10 )) /tmp/bin/ts run workloads/assistant.ron \
    --policy $p --resident-reference --iterations 5 --cap 80MiB > $W/j_$p.txt 2>&1
  echo "rc $?" >> $W/j_$p.txt
  grep -vE "stream_journal" $W/j_$p.txt | grep -E "^rc|pipeline turn|/LB|by phase|GPU stall|^(planned|lru) " | cut -c1-260
  xz -T4 -6 $W/j_$p.txt; save
done
ls -la $W
echo "elapsed $(( $(date +%s) - T0 )) s"
# ABLATE: lines of extra `run` arguments for `planned` alone after a resident reference
# (e.g. "--steps-per-part 8"), one run each, while BUDGET lasts.
n=0
while IFS= read -r a; do
  [ -z "$a" ] && continue
  [ "$(left)" -lt 45 ] && break
  n=$((n+1))
  timeout $(( $(left) - 10 )) /tmp/bin/ts run workloads/assistant.ron --policy planned --resident-reference --iterations 5 --cap 80MiB $a \
    > $W/ablate$n.txt 2>&1; echo "rc $? args $a" >> $W/ablate$n.txt
  save
  echo "== $a"; grep -E "^rc|^(resident|planned) |by phase" $W/ablate$n.txt | cut -c1-260
done <<< "${ABLATE:-}"
echo "elapsed $(( $(date +%s) - T0 )) s"
