#!/usr/bin/env bash
# H200 session 25, run 7: the real assistant at 7d0d67d (its Whisper encoder runs fp16
# activations, so its self-attention over 1500 frames now takes the tensor-core kernel) under
# every policy, as session 24's run 10: same set-up (session 23's setup.sh and stash.sh, the six
# pieces carried by the calls before). Checks the transcript and the reply against run 10's.
set -u
source "$(dirname "$0")/../../h200-2026-12-04-s23/scripts/setup.sh"
timeout $(( $(left) - 10 )) /tmp/bin/ts run workloads/assistant.ron --resident-reference --iterations 6 \
  --all-policies --metrics-json $W/all.json > $W/all.txt 2>&1; echo "rc $?" >> $W/all.txt
save
grep -E "transcript|reply|^rc" $W/all.txt | head; grep -E "^(preload|on-demand|lru|planned|resident)" $W/all.txt | head
grep -E "Attention|encoder" $W/all.txt | head -5
echo "elapsed $(( $(date +%s) - T0 )) s"
