#!/usr/bin/env bash
# H200 session 22, run 3: a step's commands are now kept as data and emitted into each run's
# submission (no secondary command buffer: run 2 measured 1.45 µs of GPU time for executing
# each). `texstream bench commands`, then the real assistant under every policy beside the
# resident reference, then the resident reference and planned with every step recorded again
# (--step-reuse off) in the same call.
set -u
source "$(dirname "$0")/setup.sh"
for n in 512 4096; do /tmp/bin/ts bench commands --dispatches $n --runs 20 > $W/commands_$n.txt 2>&1; done
save
timeout $(( $(left) - 10 )) /tmp/bin/ts run workloads/assistant.ron --resident-reference --iterations 6 \
  --all-policies --metrics-json $W/all.json > $W/all.txt 2>&1; echo "rc $?" >> $W/all.txt
save
if [ "$(left)" -gt 120 ]; then
  timeout $(( $(left) - 10 )) /tmp/bin/ts run workloads/assistant.ron --resident-reference --iterations 6 \
    --policy planned --step-reuse off --metrics-json $W/off.json > $W/off.txt 2>&1; echo "rc $?" >> $W/off.txt
  save
fi
