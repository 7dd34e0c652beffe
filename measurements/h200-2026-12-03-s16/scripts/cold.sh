#!/usr/bin/env bash
# H200 session 16: cold starts with packed files opened lazily (header checked at open, each
# page when it is read): `texstream run workloads/assistant-scale.ron --cold --iterations 3`
# under preload (3 GiB, everything resident) and planned (693 MiB, a quarter), after
# stream.sh has generated and compiled the 1.34 B models. Outputs: $OUT/cold.tgz.
set -u
cd "$(dirname "$0")/../../.."
bash measurements/h200-2026-12-03-s16/scripts/stream.sh 693MiB
W=/tmp/cold; rm -rf $W; mkdir -p $W
for spec in preload:3GiB planned:693MiB; do
  p=${spec%%:*}; c=${spec#*:}
  timeout 120 /tmp/bin/texstream run workloads/assistant-scale.ron --policy $p --cap $c \
    --iterations 3 --cold > $W/cold-$p.txt 2>&1
  echo "rc $?" >> $W/cold-$p.txt
done
tar czf $OUT/cold.tgz -C $W .
grep -h -E "^cold start|^host mirror|^rc" $W/cold-*.txt
