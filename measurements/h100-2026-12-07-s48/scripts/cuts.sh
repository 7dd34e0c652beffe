#!/usr/bin/env bash
# Session 48, a call after stash.sh has carried q00..q02 (this one carries q03, r00, .gl and
# .dev45/ts.xz): `planned` alone at 80 MiB after a resident reference, with the stream journal
# and every part boundary a copy forced logged at trace level (`forced cut before step value
# V: model M page P is load W (N loads ago); load A waits for the part`), summarized by cuts.py:
# which pages' copies force the cuts, and how recently their loads were issued.
set -u
source "$(dirname "$0")/setup.sh"
RUST_LOG=texstream::stream_journal=trace,texstream_vk::stream_cuts=trace,texstream::runtime::stream_exec=trace timeout $(( $(left) - 20 )) \
  /tmp/bin/ts run workloads/assistant.ron --policy planned --resident-reference --iterations 5 --cap 80MiB > $W/c_planned.txt 2>&1
echo "rc $?" >> $W/c_planned.txt
grep -vE "stream_journal|forced cut" $W/c_planned.txt | grep -E "^rc|/LB|compute submissions|by phase|^planned " | cut -c1-260
python3 "$(dirname "$0")/cuts.py" $W/c_planned.txt > $W/cuts.txt 2>&1; cat $W/cuts.txt
xz -T8 -6 $W/c_planned.txt; save
echo "elapsed $(( $(date +%s) - T0 )) s"
