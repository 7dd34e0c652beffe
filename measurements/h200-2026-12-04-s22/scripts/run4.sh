#!/usr/bin/env bash
# H200 session 22, run 4: a run of the model that ran last keeps its arena images (no discard)
# and skips uploading inputs whose values are still there (the speech decoder's fixed 9 MB of
# cross-attention keys and values per token went up through the 512 KiB staging in 18 copies,
# each a submission and a wait; run 3: the upload phase took 1.2 s of every policy's 4.4-10 s).
# The real assistant under every policy, then the mixed workload (camera OCR frames and
# assistant turns under one cap) under every policy.
set -u
source "$(dirname "$0")/setup.sh"
timeout $(( $(left) - 10 )) /tmp/bin/ts run workloads/assistant.ron --resident-reference --iterations 6 \
  --all-policies --metrics-json $W/all.json > $W/all.txt 2>&1; echo "rc $?" >> $W/all.txt
save
if [ "$(left)" -gt 150 ]; then
  timeout $(( $(left) - 10 )) /tmp/bin/ts run workloads/mixed.ron --resident-reference --iterations 4 \
    --all-policies --metrics-json $W/mixed.json > $W/mixed.txt 2>&1; echo "rc $?" >> $W/mixed.txt
  save
fi
