#!/usr/bin/env bash
# H200 session 24, run 9: after run 7, host costs: the recorder's hazard and image sets and the
# residency maps hash with foldhash instead of SipHash, and the stream engine asks a compute
# submission's fence only once its last value has signalled (each fence query is a `poll`
# system call on the H200). The assistant under every policy three times, then `mixed.ron`.
set -u
source "$(dirname "$0")/setup.sh"
for name in all allb allc; do
  [ "$(left)" -gt 150 ] || break
  timeout $(( $(left) - 10 )) /tmp/bin/ts run workloads/assistant.ron --resident-reference --iterations 6 \
    --all-policies --metrics-json $W/$name.json > $W/$name.txt 2>&1; echo "rc $?" >> $W/$name.txt
  save
done
if [ "$(left)" -gt 120 ]; then
  timeout $(( $(left) - 10 )) /tmp/bin/ts run workloads/mixed.ron --resident-reference --iterations 12 \
    --all-policies --metrics-json $W/mixed.json > $W/mixed.txt 2>&1; echo "rc $?" >> $W/mixed.txt
  save
fi
