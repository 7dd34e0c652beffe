#!/usr/bin/env bash
# Session 43, run 1: recorded steps as command buffers of their own (6b84bee, .dev43/ts.xz).
# `bench commands`: what a step's own command buffer costs the GPU and saves the host on a
# chain of small dependent dispatches. Then the real assistant under every policy (as session
# 25's run 10: `run workloads/assistant.ron --resident-reference --iterations 6
# --all-policies`, 80 MiB cap), with the step buffers (the default) and without
# (`--step-buffers off`, the emission of session 22 on), alternating while time lasts.
set -u
source "$(dirname "$0")/setup.sh"
timeout 60 /tmp/bin/ts bench commands --dispatches 512 --runs 20 > $W/commands.txt 2>&1; echo "rc $?" >> $W/commands.txt
save
for r in on_a off_a; do
  [ "$(left)" -gt 150 ] || break
  timeout $(( $(left) - 15 )) /tmp/bin/ts run workloads/assistant.ron --resident-reference --iterations 6 \
    --all-policies --step-buffers ${r%_*} --metrics-json $W/$r.json > $W/$r.txt 2>&1; echo "rc $?" >> $W/$r.txt
  save
done
# Where the host's time goes now: `planned` alone (step buffers on) under perf (Debian's perf
# and its libraries, .dev43/perf.txz), per thread and function of the engine's GPU thread.
if [ "$(left)" -gt 100 ]; then
  mkdir -p /tmp/perf && tar xJf .dev43/perf.txz -C /tmp/perf
  PERF() { /tmp/perf/perf/lib/ld-linux-x86-64.so.2 --library-path /tmp/perf/perf/lib /tmp/perf/perf/perf "$@"; }
  timeout $(( $(left) - 40 )) /tmp/perf/perf/lib/ld-linux-x86-64.so.2 --library-path /tmp/perf/perf/lib /tmp/perf/perf/perf \
    record -F 1999 -e cpu-clock -o /tmp/planned.data /tmp/bin/ts run workloads/assistant.ron --iterations 6 \
    --policy planned --metrics-json $W/perf_planned.json > $W/perf_planned.txt 2>&1; echo "rc $?" >> $W/perf_planned.txt
  PERF report -i /tmp/planned.data --sort comm,dso --stdio 2>&1 | head -60 > $W/perf_comm.txt
  PERF report -i /tmp/planned.data --comm texstream-gpu --sort dso,sym --stdio 2>&1 | head -150 > $W/perf_gpu_thread.txt
  save
fi
cat $W/xfer.txt $W/gpu.txt; tail -1 $W/convert_*.txt; cat $W/commands.txt
for r in on_a off_a; do [ -f $W/$r.txt ] || continue; echo "== $r"
  grep -E "transcript|^rc|^(resident|on-demand|lru|planned) |by phase|host time" $W/$r.txt | head -30; done
echo "elapsed $(( $(date +%s) - T0 )) s"
