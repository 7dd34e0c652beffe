#!/usr/bin/env bash
# H200 session 21, run 2: run 1 found shorter compute batches slower (16 steps beat 7 and 4) and
# each compute submission dearer while copies were submitted beside it (planned at 4 steps: 2.37 s
# of host time in 88 416 compute submissions against the resident reference's 1.39 s for the
# same count). Copies now share a transfer submission whenever their slots' readers finished in
# one compute batch (the wait is that batch's end), not only when their reader values fall in
# order. The real assistant at 16 steps a batch under every policy beside the resident
# reference, then planned at 8 steps, then planned with up to 16 copies a submission.
set -u
source "$(dirname "$0")/setup.sh"
save
A="workloads/assistant.ron --resident-reference --iterations 6"
timeout $(( $(left) - 200 )) /tmp/bin/ts run $A --all-policies --metrics-json $W/b16.json > $W/b16.txt 2>&1; echo "rc $?" >> $W/b16.txt
save
timeout $(( $(left) - 100 )) /tmp/bin/ts run $A --policy planned --steps-per-batch 8 --metrics-json $W/planned_b8.json > $W/planned_b8.txt 2>&1; echo "rc $?" >> $W/planned_b8.txt
save
timeout $(( $(left) - 5 )) /tmp/bin/ts run $A --policy planned --loads-per-submit 16 --metrics-json $W/planned_l16.json > $W/planned_l16.txt 2>&1; echo "rc $?" >> $W/planned_l16.txt
save
