#!/usr/bin/env bash
# H200 session 24, run 4 (the code of a6b6108): the stream engine probes the hand-off between
# its queues at creation and the calibration re-plan charges it; `planned` also weighs
# min-cool-deep. The real assistant under every policy beside the resident reference, twice
# (the reference moved 15 % between calls in session 23), then the mixed workload with more
# iterations than before (four frames were host-noise dominated).
set -u
source "$(dirname "$0")/setup.sh"
for name in all allb; do
  [ "$(left)" -gt 150 ] || break
  timeout $(( $(left) - 10 )) /tmp/bin/ts run workloads/assistant.ron --resident-reference --iterations 6 \
    --all-policies --metrics-json $W/$name.json > $W/$name.txt 2>&1; echo "rc $?" >> $W/$name.txt
  save
done
if [ "$(left)" -gt 120 ]; then
  timeout $(( $(left) - 10 )) /tmp/bin/ts run workloads/mixed.ron --resident-reference --iterations 12 \
    --all-policies --metrics-json $W/mixed.json > $W/mixed.txt 2>&1; echo "rc $?" >> $W/mixed.txt
  save
fi
