#!/usr/bin/env bash
# Session 49, a call after stash.sh has carried q00..q02 (this one carries q03, r00, .gl and
# .dev45/ts.xz): `planned` at 80 MiB after a resident reference, three times, printing where
# the recording thread's time went (its CPU time, the kernel's share, minor page faults) and
# how many command pools the device created: is the streamed runs' slower, varying recording
# CPU in the kernel (faults on fresh driver memory, system calls) or in user space?
set -u
source "$(dirname "$0")/setup.sh"
for i in 1 2 3 4; do
  [ $(left) -lt 50 ] && break
  f=$W/host$i.txt
  extra=""; [ $((i % 2)) = 0 ] && extra="--plan-construction min-cool-early"
  timeout $(( $(left) - 10 )) /tmp/bin/ts run workloads/assistant.ron --policy planned --resident-reference \
    --iterations 5 --cap 80MiB $extra > $f 2>&1
  echo "rc $?" >> $f
  echo "== run $i $extra"
  grep -E "by phase|host time|runs/LB|^planned " $f | cut -c1-330
done
save
echo "elapsed $(( $(date +%s) - T0 )) s"
