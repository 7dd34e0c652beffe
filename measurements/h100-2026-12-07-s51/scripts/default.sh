#!/usr/bin/env bash
# Session 51 (written in session 50, run here with the binary that counts the host's waits):
# (1) the resident run alone and held to the GPU's pace (`--host-lead 1`): does its
# kernel recording slow like a host-bound streamed run's (session 50's hypothesis)? (2) `planned`
# with its resident reference, the new default (a part per batch), as often as the lease allows.
set -u
source "$(dirname "$0")/setup.sh"
r=0
for lead in "" 1 "" 1; do
  [ $(left) -lt 60 ] && break
  r=$((r + 1))
  f=$W/resident$r-lead${lead:-none}.txt
  timeout $(( $(left) - 5 )) /tmp/bin/ts run workloads/assistant.ron --policy preload --cap 4GiB \
    --iterations 5 ${lead:+--host-lead $lead} > $f 2>&1
  echo "rc $?" >> $f
  echo "== resident, host lead ${lead:-none}"
  grep -E "by phase|host time|parts \(" $f | cut -c1-300
done
i=0
while [ $(left) -gt 40 ]; do
  i=$((i + 1))
  f=$W/default$i.txt
  timeout $(( $(left) - 5 )) /tmp/bin/ts run workloads/assistant.ron --policy planned --resident-reference \
    --iterations 5 --cap 80MiB > $f 2>&1
  echo "rc $?" >> $f
  echo "== run $i"
  grep -E "by phase|runs/LB|^planned |parts \(" $f | cut -c1-300
  save
done
save
echo "elapsed $(( $(date +%s) - T0 )) s"
