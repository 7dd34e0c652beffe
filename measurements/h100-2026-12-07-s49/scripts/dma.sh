#!/usr/bin/env bash
# Session 49, a call after stash.sh has carried q00..q02 (this one carries q03, r00, .gl and
# .dev45/ts.xz): does host-memory traffic slow the record thread? The resident run (`preload`,
# every weight in device memory, no copies) alone, then while a second process streams the
# assistant under `planned` at 80 MiB (about 40 GB/s of copies from pinned host memory), then
# alone again; each prints its record phase's thread CPU time.
set -u
source "$(dirname "$0")/setup.sh"
res() { timeout $(( $(left) - 5 )) /tmp/bin/ts run workloads/assistant.ron --policy preload --iterations 5 --cap 1GiB > $1 2>&1; echo "rc $?" >> $1; }
res $W/alone1.txt
echo "background starts $(date +%s.%N)" > $W/times.txt
/tmp/bin/ts run workloads/assistant.ron --policy planned --iterations 12 --cap 80MiB > $W/background.txt 2>&1 &
bg=$!
sleep 6
echo "beside starts $(date +%s.%N)" >> $W/times.txt
res $W/beside.txt
echo "beside ends $(date +%s.%N)" >> $W/times.txt
wait $bg; echo "rc $?" >> $W/background.txt
echo "background ends $(date +%s.%N)" >> $W/times.txt
res $W/alone2.txt
for f in alone1 beside alone2 background; do echo "== $f"; grep -E "by phase|host time|^pipeline turn" $W/$f.txt | cut -c1-300; done
cat $W/times.txt
save
echo "elapsed $(( $(date +%s) - T0 )) s"
