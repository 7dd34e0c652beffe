#!/usr/bin/env bash
# H200 session 24, run 8: after the page-table change (27cb1ed), `planned` under perf with call graphs again, to
# see where the GPU thread's host time goes now (run 7: record+submit 3.0-4.1 s of planned's model runs).
set -u
source "$(dirname "$0")/setup.sh"
mkdir -p /tmp/perf && tar xJf .devbin/perf.txz -C /tmp/perf
PERF() { /tmp/perf/perf/lib/ld-linux-x86-64.so.2 --library-path /tmp/perf/perf/lib /tmp/perf/perf/perf "$@"; }
lscpu > $W/lscpu.txt 2>&1
for v in "planned:--policy planned"; do
  name=${v%%:*}; args=${v#*:}
  [ "$(left)" -gt 150 ] || break
  head -1 /proc/stat > $W/$name.stat.txt
  timeout $(( $(left) - 100 )) bash -c "/tmp/perf/perf/lib/ld-linux-x86-64.so.2 --library-path /tmp/perf/perf/lib /tmp/perf/perf/perf record -F 999 --call-graph dwarf,16384 -o /tmp/$name.data /tmp/bin/ts run workloads/assistant.ron --iterations 6 $args --metrics-json $W/$name.json" > $W/$name.txt 2>&1; echo "rc $?" >> $W/$name.txt
  head -1 /proc/stat >> $W/$name.stat.txt
  save
  timeout $(( $(left) - 20 )) bash -c "/tmp/perf/perf/lib/ld-linux-x86-64.so.2 --library-path /tmp/perf/perf/lib /tmp/perf/perf/perf report -i /tmp/$name.data --comm texstream-gpu --children --sort sym --stdio -g none --percent-limit 0.3" > $W/$name.children.txt 2>&1
  save
done
