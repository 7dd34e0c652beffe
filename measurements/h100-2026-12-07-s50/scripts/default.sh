#!/usr/bin/env bash
# Session 50, the binary at 0abb25f (a part per batch by default): `planned` with its resident
# reference, as many times as the lease allows.
set -u
source "$(dirname "$0")/setup.sh"
i=0
while [ $(left) -gt 40 ]; do
  i=$((i + 1))
  f=$W/default$i.txt
  timeout $(( $(left) - 5 )) /tmp/bin/ts run workloads/assistant.ron --policy planned --resident-reference \
    --iterations 5 --cap 80MiB > $f 2>&1
  echo "rc $?" >> $f
  echo "== run $i"
  grep -E "by phase|runs/LB|^planned |parts \(" $f | cut -c1-300
  save
done
echo "elapsed $(( $(date +%s) - T0 )) s"
