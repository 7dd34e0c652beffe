#!/usr/bin/env bash
# H200 session 21, run 3: where the host time of a streamed run goes. The stream engine now
# reports its host time by part (loads, step bookkeeping, kernel recording, submitting). The
# real assistant under `planned` beside the resident reference, at 16 steps a batch and at 4
# (run 1: at 4 steps planned's record+submit phase took 3.1 s more than the resident
# reference's with the same number of compute submissions).
set -u
source "$(dirname "$0")/setup.sh"
save
A="workloads/assistant.ron --resident-reference --iterations 6 --policy planned"
for b in 16 4; do
  timeout $(( $(left) - 20 )) /tmp/bin/ts run $A --steps-per-batch $b --metrics-json $W/planned_b$b.json > $W/planned_b$b.txt 2>&1; echo "rc $?" >> $W/planned_b$b.txt
  save
done
