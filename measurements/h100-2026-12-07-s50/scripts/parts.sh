#!/usr/bin/env bash
# Session 50, after perf2.sh: parts of 64 steps made the streamed run's host 3x cheaper than
# parts of 4 on one host. The same with the resident reference (so runs/LB has the resident
# run's step costs), alternating part lengths in one lease. A part is at most a batch (16
# steps by default), so 64 means one part a batch unless a copy forces a cut; `64b32` also
# takes batches of 32 steps.
set -u
source "$(dirname "$0")/setup.sh"
P="/tmp/perfb/ld-linux-x86-64.so.2 --library-path /tmp/perfb /tmp/perfb/perf"
i=0
for parts in 4 64 4 64 64b32; do
  [ $(left) -lt 45 ] && break
  i=$((i + 1))
  f=$W/parts$i-$parts.txt
  # Runs 3 and 4: perf's flat profile of the whole process (the GPU worker thread's samples
  # by library and symbol, with counts, so the two part lengths compare sample for sample).
  pre=""; [ $i = 3 -o $i = 4 ] && pre="$P record -F 999 -o /tmp/p$i.data --"
  timeout $(( $(left) - 10 )) $pre /tmp/bin/ts run workloads/assistant.ron --policy planned --resident-reference \
    --iterations 5 --cap 80MiB --steps-per-part ${parts%b*} $([ "${parts#*b}" != "$parts" ] && echo --steps-per-batch ${parts#*b}) > $f 2>&1
  echo "rc $?" >> $f
  echo "== run $i, parts of $parts"
  grep -E "by phase|host time|runs/LB|^planned |parts \(" $f | cut -c1-300
  if [ -n "$pre" ]; then
    for srt in dso dso,sym; do
      $P report -i /tmp/p$i.data --no-children -g none --show-nr-samples \
        --sort comm,$srt --stdio 2>/dev/null | grep texstream-gpu | head -120 > $W/perf$i-${srt/,/-}.txt
    done
    head -8 $W/perf$i-dso.txt
  fi
done
save
echo "elapsed $(( $(date +%s) - T0 )) s"
