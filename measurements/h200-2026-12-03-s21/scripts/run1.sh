#!/usr/bin/env bash
# H200 session 21, run 1: the real assistant (workloads/assistant.ron at its 80 MiB cap, 22 slots)
# with compute submitted in batches of a third of the slots (7 steps) instead of 16, so a copy
# into a slot no longer waits for most of the steps before the one that reads it: every policy
# against the resident reference at the new default, then `planned` alone at 16 steps (the old
# batch) and at 4, each six requests (four measured after calibration). Then the mixed stream
# (ten camera frames a turn) if time is left. Outputs: $OUT/d.tgz.
set -u
source "$(dirname "$0")/setup.sh"
save
A="workloads/assistant.ron --resident-reference --iterations 6"
timeout $(( $(left) - 300 )) /tmp/bin/ts run $A --all-policies --metrics-json $W/auto.json > $W/auto.txt 2>&1; echo "rc $?" >> $W/auto.txt
save
for b in 16 4; do
  timeout $(( $(left) - 150 )) /tmp/bin/ts run $A --policy planned --steps-per-batch $b --metrics-json $W/planned_b$b.json > $W/planned_b$b.txt 2>&1; echo "rc $?" >> $W/planned_b$b.txt
  save
done
D=$(( ($(left) - 40) / 3 - 12 )); [ $D -gt 40 ] && D=40
if [ $D -ge 15 ]; then
  timeout $(( $(left) - 10 )) /tmp/bin/ts bench stream workloads/mixed.ron --arrivals frame=every:500 \
    --arrivals turn=every:5000 --duration $D --json $W/mixed_stream.json > $W/mixed_stream.txt 2>&1
  echo "rc $? (duration $D s a policy)" >> $W/mixed_stream.txt
fi
save
