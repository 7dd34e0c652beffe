#!/usr/bin/env bash
# Session 47, a call after run.sh on the machine still held: the assistant at 80 MiB under
# `planned` and `lru`, one engine setting changed at a time (ARGS lines below), each run
# after a resident reference; where `planned`'s model-run time goes. BUDGET (s) bounds it.
set -u
source "$(dirname "$0")/setup.sh"
i=0
while IFS= read -r line; do
  [ -z "$line" ] && continue
  i=$((i+1))
  [ "$(left)" -lt 45 ] && break
  echo "== $line" >> $W/ablate.txt
  timeout $(( $(left) - 10 )) /tmp/bin/ts run workloads/assistant.ron --resident-reference --iterations 5 --cap 80MiB $line > $W/a$i.txt 2>&1
  echo "rc $?" >> $W/a$i.txt
  grep -E "^rc|pipeline turn|by phase|stream engine host|/LB|stream a page|GPU stall|^(planned|lru) " $W/a$i.txt | cut -c1-240 >> $W/ablate.txt
  save
done <<< "${ARGS:-}"
cat $W/ablate.txt
echo "elapsed $(( $(date +%s) - T0 )) s"
