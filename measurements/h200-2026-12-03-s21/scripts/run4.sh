#!/usr/bin/env bash
# H200 session 21, run 4: a model run's inputs are now copied in the run's first compute
# submission and its outputs in its last where they fit the staging buffers together, instead of
# one submission and wait per input and per output (run 3: 1.7 s of 5.3 s in the resident
# reference's upload phase over four requests, 2.4 s under planned; readback 0.27 and 0.38 s). The real assistant under every policy beside the resident reference at
# the default 16 steps a batch.
set -u
source "$(dirname "$0")/setup.sh"
save
timeout $(( $(left) - 10 )) /tmp/bin/ts run workloads/assistant.ron --resident-reference --iterations 6 \
  --all-policies --metrics-json $W/all.json > $W/all.txt 2>&1; echo "rc $?" >> $W/all.txt
save
