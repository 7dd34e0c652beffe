#!/usr/bin/env bash
# H200 session 24, run 5: where the host's time goes. Run 4 showed `planned` host-bound on the
# H200 (record+submit 4.7 s of its 6.5 s of model runs, GPU wait 1.0 s; the resident run's
# record+submit is 1.1 s), and its kernel recording three times the resident run's for the
# same recorded steps. Each policy runs alone under `perf record` (the Debian perf binary and
# its libraries, carried as .devbin/perf.txz; the texstream binary carried unstripped), and
# perf reports, per thread, which libraries and functions the time went to.
set -u
source "$(dirname "$0")/setup.sh"
mkdir -p /tmp/perf && tar xJf .devbin/perf.txz -C /tmp/perf
PERF() { /tmp/perf/perf/lib/ld-linux-x86-64.so.2 --library-path /tmp/perf/perf/lib /tmp/perf/perf/perf "$@"; }
PERF --version > $W/perf_version.txt 2>&1
for v in "preload:--policy preload --cap 600MiB" "planned:--policy planned" "lru:--policy lru"; do
  name=${v%%:*}; args=${v#*:}
  [ "$(left)" -gt 90 ] || break
  ev=cpu-clock
  PERF record -F 1999 -e $ev -o /tmp/$name.data true > /dev/null 2>&1 || ev=cpu-clock:u
  timeout $(( $(left) - 40 )) bash -c "/tmp/perf/perf/lib/ld-linux-x86-64.so.2 --library-path /tmp/perf/perf/lib /tmp/perf/perf/perf record -F 1999 -e $ev -o /tmp/$name.data /tmp/bin/ts run workloads/assistant.ron --iterations 6 $args --metrics-json $W/$name.json" > $W/$name.txt 2>&1; echo "rc $? ev $ev" >> $W/$name.txt
  PERF report -i /tmp/$name.data --sort comm,dso --stdio > $W/$name.comm.txt 2>&1
  for t in texstream-gpu texstream-trans; do
    PERF report -i /tmp/$name.data --comm $t --sort dso,sym --stdio 2>&1 | head -200 > $W/$name.$t.txt
  done
  save
done
