#!/usr/bin/env bash
# H200 session 24, run 7: run 6's call graphs put the GPU thread's extra time under `planned`
# in the page-table updates of the compute stream: every step that maps a page wrote the table
# with vkCmdUpdateBuffer (a write after the earlier steps' reads, so a full barrier) and then
# read it (a second barrier), and every eviction wrote it again. Now the transfer queue writes a
# copied page's entry in the copy's own submission (the copy also waits for the last step that
# read the entry), and evictions leave it. The assistant under every policy beside the
# resident reference, twice, then the mixed workload.
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
