#!/usr/bin/env bash
# H200 session 23, run 1: a compute submission is recorded in parts, each with its own wait
# (its own steps' pages) and signal (the copies waiting for its readers). A step that needs a
# copy waiting for a step of the open submission starts a new part instead of submitting the
# batch (session 22: 51 121 compute submissions under `planned`, 36 us of host time each).
# The real assistant under every policy beside the resident reference (parts of at least 4
# steps, the default), then `planned` with parts cut only where needed (--steps-per-part 16),
# parts of 1, and longer batches (--steps-per-batch 64), then the mixed workload.
set -u
source "$(dirname "$0")/setup.sh"
timeout $(( $(left) - 10 )) /tmp/bin/ts run workloads/assistant.ron --resident-reference --iterations 6 \
  --all-policies --metrics-json $W/all.json > $W/all.txt 2>&1; echo "rc $?" >> $W/all.txt
save
for v in "p16:--steps-per-part 16" "p1:--steps-per-part 1" "b64:--steps-per-batch 64"; do
  name=${v%%:*}; args=${v#*:}
  [ "$(left)" -gt 60 ] || break
  timeout $(( $(left) - 10 )) /tmp/bin/ts run workloads/assistant.ron --iterations 6 \
    --policy planned $args --metrics-json $W/$name.json > $W/$name.txt 2>&1; echo "rc $?" >> $W/$name.txt
  save
done
if [ "$(left)" -gt 150 ]; then
  timeout $(( $(left) - 10 )) /tmp/bin/ts run workloads/mixed.ron --resident-reference --iterations 4 \
    --all-policies --metrics-json $W/mixed.json > $W/mixed.txt 2>&1; echo "rc $?" >> $W/mixed.txt
  save
fi
