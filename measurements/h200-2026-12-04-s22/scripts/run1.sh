#!/usr/bin/env bash
# H200 session 22, run 1: each streamed model step's commands are now recorded once (a secondary
# command buffer) and executed again on later runs, instead of recorded again every run (session
# 21, run 3: recording took 2.3 s of the resident reference's 5.3 s over six requests, 4.0-5.2 s
# of planned's). The real assistant under every policy beside the resident reference, then the
# resident reference and planned with every step recorded again (--step-reuse off) in the same call.
set -u
source "$(dirname "$0")/setup.sh"
save
timeout $(( $(left) - 10 )) /tmp/bin/ts run workloads/assistant.ron --resident-reference --iterations 6 \
  --all-policies --metrics-json $W/all.json > $W/all.txt 2>&1; echo "rc $?" >> $W/all.txt
save
if [ "$(left)" -gt 120 ]; then
  timeout $(( $(left) - 10 )) /tmp/bin/ts run workloads/assistant.ron --resident-reference --iterations 6 \
    --policy planned --step-reuse off --metrics-json $W/off.json > $W/off.txt 2>&1; echo "rc $?" >> $W/off.txt
  save
fi
