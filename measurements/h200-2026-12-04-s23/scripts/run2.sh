#!/usr/bin/env bash
# H200 session 23, run 2: what a part of a submission costs (`texstream bench commands`, now
# with the chain emitted in parts of 4 and of 1, each part its own command buffer and signal),
# then the real assistant under every policy with parts cut only where a copy needs it
# (--steps-per-part 16), and again with 64-step batches; `run` now names planned's construction
# and counts the parts.
set -u
source "$(dirname "$0")/setup.sh"
for n in 512 4096; do /tmp/bin/ts bench commands --dispatches $n --runs 20 > $W/commands_$n.txt 2>&1; done
save
timeout $(( $(left) - 10 )) /tmp/bin/ts run workloads/assistant.ron --resident-reference --iterations 6 \
  --all-policies --steps-per-part 16 --metrics-json $W/p16.json > $W/p16.txt 2>&1; echo "rc $?" >> $W/p16.txt
save
if [ "$(left)" -gt 150 ]; then
  timeout $(( $(left) - 10 )) /tmp/bin/ts run workloads/assistant.ron --resident-reference --iterations 6 \
    --all-policies --steps-per-part 16 --steps-per-batch 64 --metrics-json $W/p16b64.json > $W/p16b64.txt 2>&1; echo "rc $?" >> $W/p16b64.txt
  save
fi
if [ "$(left)" -gt 100 ]; then
  timeout $(( $(left) - 10 )) /tmp/bin/ts run workloads/assistant.ron --iterations 6 \
    --policy planned --metrics-json $W/p4.json > $W/p4.txt 2>&1; echo "rc $?" >> $W/p4.txt
  save
fi
