#!/usr/bin/env bash
# Session 49, a call after stash.sh has carried q00..q02 (this one carries q03, r00, .gl and
# .dev45/ts.xz): `planned` alone at 80 MiB after a resident reference, with the stream journal
# (loads with ticket, reader and issue time; parts with the load they waited for), every forced
# part boundary, every lookup page load, every copy waiting for a newer reader than its plan said
# and every re-plan (variant, loads, forced submissions the simulation expects) logged. stalls.py says what each
# stalled part's copy waited for; cuts.py which copies forced cuts; journal.py the queues' time.
set -u
source "$(dirname "$0")/setup.sh"
S="$(dirname "$0")"
RUST_LOG=texstream::stream_journal=trace,texstream_vk::stream_cuts=trace,texstream::runtime::stream_exec=trace,texstream::engine::replan=debug timeout $(( $(left) - 40 )) \
  /tmp/bin/ts run workloads/assistant.ron --policy planned --resident-reference --iterations 5 --cap 80MiB > $W/c_planned.txt 2>&1
echo "rc $?" >> $W/c_planned.txt
grep -vE "stream_journal|forced cut|lookup of|newer reader" $W/c_planned.txt | cut -c1-400 > $W/table.txt; grep -v "re-plan (" $W/table.txt | tail -28; grep "re-plan (" $W/table.txt | sed "s/.*re-plan/re-plan/" | head -40
echo "newer readers: $(grep -c "newer reader" $W/c_planned.txt), of them with a plan reader: $(grep "newer reader" $W/c_planned.txt | grep -vc "step None")"
for m in 3 2 0; do python3 $S/stalls.py $W/c_planned.txt planned $m; done > $W/stalls.txt 2>&1; cat $W/stalls.txt
python3 $S/cuts.py $W/c_planned.txt > $W/cuts.txt 2>&1; cat $W/cuts.txt
python3 $S/journal.py $W/c_planned.txt > $W/journal.txt 2>&1; grep -A12 "(planned)" $W/journal.txt
xz -T8 -6 $W/c_planned.txt; save
echo "elapsed $(( $(date +%s) - T0 )) s"
