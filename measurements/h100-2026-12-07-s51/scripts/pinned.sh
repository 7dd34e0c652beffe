#!/usr/bin/env bash
# Session 51, for the next card (not run): does the streamed host's slow mode follow where its
# GPU thread and its copy thread run? `planned` with its resident reference, in turn unpinned,
# with the GPU thread (`texstream-gpu`) and the copy thread (`texstream-trans`) pinned to
# neighbouring cores (2 and 3), and pinned to distant ones (2 and 10); a watcher re-pins every
# new thread of those names (each engine starts its own) every 0.2 s. Each process prints its
# threads' CPU and cores (`threads (CPU since start)`), and the machine's /proc/stat ticks
# (steal among them) are kept around it.
set -u
source "$(dirname "$0")/../../h100-2026-12-07-s50/scripts/setup.sh"
pin() {  # $1: pid (`timeout`'s: its child runs the engine), $2: the GPU thread's core, $3: the copy thread's
  while kill -0 $1 2>/dev/null; do
    for t in $(for p in $1 $(pgrep -P $1); do echo /proc/$p/task/*; done); do
      case "$(cat $t/comm 2>/dev/null)" in
        texstream-gpu) taskset -p -c $2 $(basename $t) > /dev/null 2>&1 ;;
        texstream-trans) taskset -p -c $3 $(basename $t) > /dev/null 2>&1 ;;
      esac
    done
    sleep 0.2
  done
}
i=0
while [ $(left) -gt 40 ]; do
  i=$((i + 1))
  for v in free near far; do
    [ $(left) -lt 40 ] && break
    f=$W/planned$i-$v.txt
    before=$(grep '^cpu ' /proc/stat)
    timeout $(( $(left) - 5 )) /tmp/bin/ts run workloads/assistant.ron --policy planned --resident-reference \
      --iterations 5 --cap 80MiB > $f 2>&1 &
    ts=$!
    case $v in near) pin $ts 2 3 & ;; far) pin $ts 2 10 & ;; esac
    wait $ts; echo "rc $?" >> $f; wait
    { echo "proc/stat before: $before"; echo "proc/stat after:  $(grep '^cpu ' /proc/stat)"; } >> $f
    echo "== planned $i, $v"
    grep -E "by phase|runs/LB|threads \(CPU" $f | cut -c1-400
    save
  done
done
save
echo "elapsed $(( $(date +%s) - T0 )) s"
