#!/usr/bin/env bash
# Session 50, after perf.sh showed the streamed run's driver calls and the recorder's own
# work both 3-4x slower than the resident run's for the same recorded commands: the GPU worker
# thread's hardware counters (cycles, instructions, cache misses: is it slower per
# instruction or doing more?) and its profile with call stacks (which of our calls spend the
# driver's time), in a resident run and in streamed runs (parts of 4 and of 64 steps).
set -u
source "$(dirname "$0")/setup.sh"
P="/tmp/perfb/ld-linux-x86-64.so.2 --library-path /tmp/perfb /tmp/perfb/perf"
lscpu > $W/lscpu.txt 2>&1
# profile NAME [record] ARGS...: runs the assistant, attaching perf to its GPU worker thread.
profile() {
  name=$1; rec=$2; shift 2
  f=$W/$name.txt
  grep "^cpu " /proc/stat > $W/$name-procstat.txt
  grep -E "TLB|CAL|LOC|RES" /proc/interrupts | awk '{s=0; for(i=2;i<=NF;i++) if ($i ~ /^[0-9]+$/) s+=$i; print $1, s}' > $W/$name-irq.txt
  /tmp/bin/ts run workloads/assistant.ron --iterations 5 "$@" > $f 2>&1 &
  pid=$!
  tid=""
  for i in $(seq 1 600); do
    tid=$(for t in /proc/$pid/task/*; do [ "$(cat $t/comm 2>/dev/null)" = texstream-gpu ] && basename $t; done)
    [ -n "$tid" ] && break; sleep 0.02
  done
  $P stat -e task-clock,cycles,instructions,cache-references,cache-misses,branch-misses,context-switches -t $tid \
    > $W/$name-stat.txt 2>&1 &
  sp=$!
  if [ $rec = record ]; then
    $P record --call-graph dwarf,16384 -F 499 -t $tid -o /tmp/$name.data > $W/$name-record.txt 2>&1 &
    rp=$!
  fi
  # The thread's own schedstat (ns on a CPU, ns waiting on a run queue, slices) near its end.
  while kill -0 $pid 2>/dev/null; do cat /proc/$pid/task/$tid/schedstat > /tmp/sched 2>/dev/null; sleep 0.2; done
  cp /tmp/sched $W/$name-schedstat.txt 2>/dev/null
  wait $pid; echo "rc $?" >> $f
  grep "^cpu " /proc/stat >> $W/$name-procstat.txt
  grep -E "TLB|CAL|LOC|RES" /proc/interrupts | awk '{s=0; for(i=2;i<=NF;i++) if ($i ~ /^[0-9]+$/) s+=$i; print $1, s}' >> $W/$name-irq.txt
  wait $sp
  if [ $rec = record ]; then
    wait $rp
    $P report -i /tmp/$name.data --no-children --percentage relative --sort dso --stdio -g none \
      > $W/$name-dso.txt 2>&1
    $P report -i /tmp/$name.data --children --percentage relative --sort sym --stdio -g none \
      2>/dev/null | grep -v "^#" | grep -v "^$" | head -150 > $W/$name-children.txt
    $P report -i /tmp/$name.data --no-children --percentage relative --sort dso,sym --stdio \
      -g caller,1,callee,function,percent 2>/dev/null | grep -v "^$" | head -1500 > $W/$name-callers.txt
    xz -1 -T4 -c /tmp/$name.data > $W/$name.data.xz
  fi
  echo "== $name"; grep -E "by phase|host time|^planned |^preload " $f | cut -c1-330
  grep -E "task-clock|cycles|instructions|cache|branch|switches" $W/$name-stat.txt
  cat $W/$name-schedstat.txt $W/$name-procstat.txt $W/$name-irq.txt
}
profile resident record --policy preload --cap 4GiB
[ $(left) -gt 90 ] && profile planned record --policy planned --cap 80MiB
# glibc never trimming its heaps nor mapping large blocks apart (each trim or unmap shoots
# down the TLBs of the process's other CPUs): does the streamed run's host get faster?
export NOTRIM="glibc.malloc.trim_threshold=4294967295:glibc.malloc.mmap_threshold=33554432"
[ $(left) -gt 60 ] && GLIBC_TUNABLES=$NOTRIM profile planned-notrim stat --policy planned --cap 80MiB
[ $(left) -gt 60 ] && profile planned-again stat --policy planned --cap 80MiB
[ $(left) -gt 60 ] && profile planned-part64 stat --policy planned --cap 80MiB --steps-per-part 64
# Which threads map and unmap memory while streaming (each unmap or narrowing mprotect
# shoots down the TLBs of every CPU running a thread of the process).
if [ $(left) -gt 60 ]; then
  timeout $(( $(left) - 20 )) /tmp/perfb/ld-linux-x86-64.so.2 --library-path /tmp/perfb /tmp/perfb/strace -f -qq -e trace=munmap,madvise,mprotect,mmap -o $W/strace.txt \
    /tmp/bin/ts run workloads/assistant.ron --iterations 2 --policy planned --cap 80MiB > $W/strace-run.txt 2>&1
  awk '{print $2}' $W/strace.txt | cut -d'(' -f1 | sort | uniq -c > $W/strace-counts.txt
  cat $W/strace-counts.txt; xz -T4 $W/strace.txt
fi
save
echo "elapsed $(( $(date +%s) - T0 )) s"
