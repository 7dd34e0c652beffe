#!/usr/bin/env bash
# Session 47, a call after stash.sh has carried q00..q02 (this one carries q03, r00, .gl and
# .dev45/ts.xz, built with the resident reference's warm-up pass): every policy at 80 MiB, the
# assistant (5 requests) and mixed.ron's camera frames (11) and assistant turn (3), each after
# a resident reference. BUDGET (s) bounds it.
set -u
source "$(dirname "$0")/setup.sh"
timeout $(( $(left) / 3 )) /tmp/bin/ts run workloads/assistant.ron --all-policies --iterations 5 --resident-reference \
  --cap 80MiB --metrics-json $W/assistant.json > $W/assistant.txt 2>&1; echo "rc $?" >> $W/assistant.txt
save
timeout $(( $(left) / 2 )) /tmp/bin/ts run workloads/mixed.ron --resident-reference --iterations 11 --cap 80MiB \
  --all-policies --metrics-json $W/mixed.json > $W/mixed.txt 2>&1; echo "rc $?" >> $W/mixed.txt
save
timeout $(( $(left) - 10 )) /tmp/bin/ts run workloads/mixed.ron --pipeline turn --resident-reference --iterations 3 \
  --cap 80MiB --all-policies --metrics-json $W/mixed_turn.json > $W/mixed_turn.txt 2>&1; echo "rc $?" >> $W/mixed_turn.txt
save
for f in $W/assistant.txt $W/mixed.txt $W/mixed_turn.txt; do grep -E "^rc|pipeline (turn|frame)|^(resident|on-demand|lru|planned|reload|least)" $f | cut -c1-230 | head -40; done
echo "elapsed $(( $(date +%s) - T0 )) s"
