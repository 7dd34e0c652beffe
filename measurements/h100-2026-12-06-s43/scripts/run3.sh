#!/usr/bin/env bash
# Session 43, run 3 (502014b, .dev43/ts.xz): each model's activation arena on the
# card (run 1 found the assistant's minimum cap 93.7 MiB there against 63.3 on lavapipe), then
# every policy at 100 MiB with the copy probe that times 128 copies whatever the slots (run 2's
# probe, 12 copies, said 49.6-59.6 us a page where the copies took 21 us, and the bound
# followed it), then `planned` under perf.
set -u
source "$(dirname "$0")/setup.sh"
RUST_LOG=texstream::engine::session=info timeout 60 /tmp/bin/ts run workloads/assistant.ron --iterations 1 --policy preload \
  --cap 1GiB > $W/arenas.txt 2>&1; echo "rc $?" >> $W/arenas.txt
timeout $(( $(left) - 100 )) /tmp/bin/ts run workloads/assistant.ron --resident-reference --iterations 6 --cap 100MiB \
  --all-policies --metrics-json $W/p100.json > $W/p100.txt 2>&1; echo "rc $?" >> $W/p100.txt
save
if [ "$(left)" -gt 100 ]; then
  mkdir -p /tmp/perf && tar xJf .dev43/perf.txz -C /tmp/perf
  PERF() { /tmp/perf/perf/lib/ld-linux-x86-64.so.2 --library-path /tmp/perf/perf/lib /tmp/perf/perf/perf "$@"; }
  timeout $(( $(left) - 40 )) /tmp/perf/perf/lib/ld-linux-x86-64.so.2 --library-path /tmp/perf/perf/lib /tmp/perf/perf/perf \
    record -F 1999 -e cpu-clock -o /tmp/planned.data /tmp/bin/ts run workloads/assistant.ron --iterations 6 --cap 100MiB \
    --policy planned --metrics-json $W/perf_planned.json > $W/perf_planned.txt 2>&1; echo "rc $?" >> $W/perf_planned.txt
  PERF report -i /tmp/planned.data --sort comm,dso --stdio 2>&1 | head -60 > $W/perf_comm.txt
  PERF report -i /tmp/planned.data --comm texstream-gpu --sort dso,sym --stdio 2>&1 | head -150 > $W/perf_gpu_thread.txt
  save
fi
cat $W/gpu.txt; grep -E "arena|^rc" $W/arenas.txt
grep -E "^rc|^(resident|on-demand|lru|planned|preload|reload)|by phase|host time|probed" $W/p100.txt | head -40
echo "elapsed $(( $(date +%s) - T0 )) s"
