#!/usr/bin/env bash
# H200 session 23, run 3: a part boundary costs the GPU about 6 us (run 2, bench commands), so
# a part is now cut for a newer page only where that page has not landed yet (a copy that
# waits for the part still cuts it). The real assistant under every policy with the defaults
# (parts of at least 4 steps, 16-step batches), then with 64-step batches, then the mixed
# workload under every policy.
set -u
source "$(dirname "$0")/setup.sh"
timeout $(( $(left) - 10 )) /tmp/bin/ts run workloads/assistant.ron --resident-reference --iterations 6 \
  --all-policies --metrics-json $W/all.json > $W/all.txt 2>&1; echo "rc $?" >> $W/all.txt
save
if [ "$(left)" -gt 150 ]; then
  timeout $(( $(left) - 10 )) /tmp/bin/ts run workloads/assistant.ron --resident-reference --iterations 6 \
    --all-policies --steps-per-batch 64 --metrics-json $W/b64.json > $W/b64.txt 2>&1; echo "rc $?" >> $W/b64.txt
  save
fi
if [ "$(left)" -gt 150 ]; then
  timeout $(( $(left) - 10 )) /tmp/bin/ts run workloads/mixed.ron --resident-reference --iterations 4 \
    --all-policies --metrics-json $W/mixed.json > $W/mixed.txt 2>&1; echo "rc $?" >> $W/mixed.txt
  save
fi
