#!/usr/bin/env bash
# Session 47, a call after stash.sh has carried q00..q02 (this one carries q03, r00, .gl and
# .dev45/ts.xz): the assistant under every policy at 80 MiB, after a resident reference, as
# many times as BUDGET (s) allows: how much each policy's ratio to its bound moves between
# runs of one binary on one machine.
set -u
source "$(dirname "$0")/setup.sh"
i=0
while [ "$(left)" -gt 100 ]; do
  i=$((i+1))
  timeout $(( $(left) - 10 )) /tmp/bin/ts run workloads/assistant.ron --all-policies --iterations 5 --resident-reference \
    --cap 80MiB --metrics-json $W/assistant$i.json > $W/assistant$i.txt 2>&1; echo "rc $?" >> $W/assistant$i.txt
  save
  echo "== run $i"; grep -E "^rc|^(resident|on-demand|lru|planned|least)" $W/assistant$i.txt | cut -c1-230
done
echo "elapsed $(( $(date +%s) - T0 )) s"
