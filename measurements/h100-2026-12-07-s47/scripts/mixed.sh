#!/usr/bin/env bash
# Session 47, a call after run.sh on the machine still held (the stash and the converted
# models stay in /tmp and models/): mixed.ron's camera frames and the assistant's turn under
# every policy at 80 MiB with this session's binary. BUDGET (s) bounds it.
set -u
source "$(dirname "$0")/setup.sh"
timeout $(( $(left) / 2 )) /tmp/bin/ts run workloads/mixed.ron --resident-reference --iterations 11 --cap 80MiB \
  --all-policies --metrics-json $W/mixed.json > $W/mixed.txt 2>&1; echo "rc $?" >> $W/mixed.txt
save
timeout $(( $(left) - 10 )) /tmp/bin/ts run workloads/mixed.ron --pipeline turn --resident-reference --iterations 3 \
  --cap 80MiB --all-policies --metrics-json $W/mixed_turn.json > $W/mixed_turn.txt 2>&1; echo "rc $?" >> $W/mixed_turn.txt
save
for f in $W/mixed.txt $W/mixed_turn.txt; do grep -E "^rc|^workload|pipeline|/LB|peak|^(resident|on-demand|lru|planned|preload|reload|least)" $f | cut -c1-220 | head -40; done
echo "elapsed $(( $(date +%s) - T0 )) s"
