#!/usr/bin/env bash
# Session 43, run 2: run 1 found the assistant's 80 MiB cap below the minimum on the H100
# (activation peak 88.9 MB), so every policy at 100 MiB, step buffers off (run 1: on costs
# the GPU 6.6 us a command buffer), then `planned` under perf.
set -u
source "$(dirname "$0")/setup.sh"
timeout $(( $(left) - 100 )) /tmp/bin/ts run workloads/assistant.ron --resident-reference --iterations 6 --cap 100MiB \
  --all-policies --step-buffers off --metrics-json $W/off100.json > $W/off100.txt 2>&1; echo "rc $?" >> $W/off100.txt
save
if [ "$(left)" -gt 100 ]; then
  mkdir -p /tmp/perf && tar xJf .dev43/perf.txz -C /tmp/perf
  PERF() { /tmp/perf/perf/lib/ld-linux-x86-64.so.2 --library-path /tmp/perf/perf/lib /tmp/perf/perf/perf "$@"; }
  timeout $(( $(left) - 40 )) /tmp/perf/perf/lib/ld-linux-x86-64.so.2 --library-path /tmp/perf/perf/lib /tmp/perf/perf/perf \
    record -F 1999 -e cpu-clock -o /tmp/planned.data /tmp/bin/ts run workloads/assistant.ron --iterations 6 --cap 100MiB \
    --policy planned --step-buffers off --metrics-json $W/perf_planned.json > $W/perf_planned.txt 2>&1; echo "rc $?" >> $W/perf_planned.txt
  PERF report -i /tmp/planned.data --sort comm,dso --stdio 2>&1 | head -60 > $W/perf_comm.txt
  PERF report -i /tmp/planned.data --comm texstream-gpu --sort dso,sym --stdio 2>&1 | head -150 > $W/perf_gpu_thread.txt
  save
fi
grep -E "^rc|^(resident|on-demand|lru|planned|preload|reload)|by phase|host time|policy .* requests" $W/off100.txt | head -40
echo "elapsed $(( $(date +%s) - T0 )) s"
