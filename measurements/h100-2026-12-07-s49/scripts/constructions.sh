#!/usr/bin/env bash
# Session 49, a call after stash.sh has carried q00..q02 (this one carries q03, r00, .gl and
# .dev45/ts.xz): `planned` at 80 MiB after a resident reference, its plans built by one
# construction at a time (`run --plan-construction`), in two rounds: which of lru-early (the
# simulator's choice on this card), min-cool-early and min-cool-deep (fewer loads, more
# simulated stall) runs closest to the bound. No logging (the journal's trace costs the host).
set -u
source "$(dirname "$0")/setup.sh"
for round in 1 2; do
  for c in lru-early min-cool-early min-cool-deep; do
    [ $(left) -lt 60 ] && break 2
    f=$W/r${round}_$c.txt
    timeout $(( $(left) - 15 )) /tmp/bin/ts run workloads/assistant.ron --policy planned --resident-reference \
      --iterations 5 --cap 80MiB --plan-construction $c > $f 2>&1
    echo "rc $?" >> $f
    echo "== round $round $c: $(grep -m1 'policy planned' $f | grep -o '(.*)  requests' | head -1)"
    grep -E "^planned |model lm |bytes streamed|GPU stall|by phase|runs/LB" $f | tail -6 | cut -c1-330
  done
done
save
echo "elapsed $(( $(date +%s) - T0 )) s"
