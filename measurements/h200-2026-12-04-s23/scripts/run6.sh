#!/usr/bin/env bash
# H200 session 24, run 6: run 5's flat profiles showed the GPU thread of `planned` spending
# 7.3 s of CPU over six requests against 4.3 s for `lru` and 2.8 s for the resident run, spread
# over the same functions, half of it inside the NVIDIA driver. Here `planned` and the resident
# run again under perf with call graphs (DWARF unwinding through .eh_frame), reported inclusive
# per function (--children), so the driver's time is charged to the Vulkan calls that made it;
# the VM's steal time (/proc/stat) and the CPU topology beside them.
set -u
source "$(dirname "$0")/setup.sh"
mkdir -p /tmp/perf && tar xJf .devbin/perf.txz -C /tmp/perf
PERF() { /tmp/perf/perf/lib/ld-linux-x86-64.so.2 --library-path /tmp/perf/perf/lib /tmp/perf/perf/perf "$@"; }
lscpu > $W/lscpu.txt 2>&1
for v in "planned:--policy planned" "preload:--policy preload --cap 600MiB"; do
  name=${v%%:*}; args=${v#*:}
  [ "$(left)" -gt 150 ] || break
  head -1 /proc/stat > $W/$name.stat.txt
  timeout $(( $(left) - 100 )) bash -c "/tmp/perf/perf/lib/ld-linux-x86-64.so.2 --library-path /tmp/perf/perf/lib /tmp/perf/perf/perf record -F 999 --call-graph dwarf,16384 -o /tmp/$name.data /tmp/bin/ts run workloads/assistant.ron --iterations 6 $args --metrics-json $W/$name.json" > $W/$name.txt 2>&1; echo "rc $?" >> $W/$name.txt
  head -1 /proc/stat >> $W/$name.stat.txt
  save
  timeout $(( $(left) - 20 )) bash -c "/tmp/perf/perf/lib/ld-linux-x86-64.so.2 --library-path /tmp/perf/perf/lib /tmp/perf/perf/perf report -i /tmp/$name.data --comm texstream-gpu --children --sort sym --stdio -g none --percent-limit 0.3" > $W/$name.children.txt 2>&1
  save
done
