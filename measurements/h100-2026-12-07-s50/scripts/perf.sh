#!/usr/bin/env bash
# Session 50, a call after stash.sh has carried q00..q02 (this one carries q03, r00, .gl,
# .dev45/ts.xz and .dev45/perf.txz, Debian's perf with its libraries): where does the GPU
# worker thread's CPU go while it records a streamed run, against a resident one?
# 1. `planned` at 80 MiB after a resident reference: the host-time line's "of it in the
#    driver's calls" for both (ec3924d).
# 2. perf's flat profile of the `texstream-gpu` thread (samples by library and by symbol) in a
#    `planned` run at 80 MiB and in a `preload` run without a cap, each its own process.
set -u
source "$(dirname "$0")/setup.sh"
P="/tmp/perfb/ld-linux-x86-64.so.2 --library-path /tmp/perfb /tmp/perfb/perf"
f=$W/ref.txt
timeout $(( $(left) - 10 )) /tmp/bin/ts run workloads/assistant.ron --policy planned --resident-reference \
  --iterations 5 --cap 80MiB > $f 2>&1; echo "rc $?" >> $f
grep -E "by phase|host time|runs/LB|^planned " $f | cut -c1-400
cat /proc/sys/kernel/perf_event_paranoid > $W/paranoid.txt 2>&1
for run in planned preload; do
  [ $(left) -lt 60 ] && break
  args="--policy planned --cap 80MiB"; [ $run = preload ] && args="--policy preload"
  f=$W/perf-$run.txt
  timeout $(( $(left) - 30 )) $P record -F 1999 -o /tmp/$run.data -- /tmp/bin/ts run workloads/assistant.ron \
    $args --iterations 5 > $f 2>&1; echo "rc $?" >> $f
  grep -E "by phase|host time|runs/LB|perf record|rror" $f | cut -c1-400
  for s in comm dso dso,sym; do
    extra="--comm texstream-gpu"; [ $s = comm ] && extra=""
    $P report -i /tmp/$run.data --no-children -g none $extra --sort $s --stdio 2>&1 \
      | grep -v "^#" | grep -v "^$" | head -80 > $W/report-$run-${s/,/-}.txt
  done
  head -12 $W/report-$run-dso.txt; head -25 $W/report-$run-dso-sym.txt
done
save
echo "elapsed $(( $(date +%s) - T0 )) s"
