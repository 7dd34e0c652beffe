#!/usr/bin/env bash
# H200 session 27, run 5: fcb7f6c (ts.xz): MinCool from a heap of the cool pages (planned plans in a
# fraction of the time), the first request's estimate at the probed copy rate and hand-off, and
# `run --cold` reports integrated ÷ the first request's LB. assistant-scale.ron at a quarter,
# every policy with a resident reference, cold, 4 iterations, as run 3. Outputs: $OUT/d.tgz.
set -u
cd "$(dirname "$0")/../../.."
T0=$(date +%s)
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
W=/tmp/d5; mkdir -p /tmp/bin $W
xz -dc .devbin/ts.xz > /tmp/bin/ts; chmod +x /tmp/bin/ts
save() { tar czf $OUT/d.tgz -C $W .; }
[ -f models/scale/lm/decoder.onnx.data ] || timeout 120 $PY scripts/make_scale_models.py models/scale --decoder 1.3b > $W/gen.txt 2>&1
timeout 120 /tmp/bin/ts check workloads/assistant-scale.ron > $W/check-scale.txt 2>&1; echo "rc $?" >> $W/check-scale.txt
echo "setup $(( $(date +%s) - T0 )) s" >> $W/gen.txt
save
timeout 300 /tmp/bin/ts run workloads/assistant-scale.ron --all-policies \
  --resident-reference --cap 693MiB --iterations 4 --cold > $W/cold.txt 2>&1; echo "rc $?" >> $W/cold.txt
save
P="workloads/assistant-scale.ron --cap 693MiB --page-time 25.3us --handoff 13.6us --reuse-lag 15"
timeout 60 /tmp/bin/ts plan $P --bench > $W/plan-bench.txt 2>&1; echo "rc $?" >> $W/plan-bench.txt
timeout 60 /tmp/bin/ts plan $P --policy planned --candidates > $W/plan-candidates.txt 2>&1; echo "rc $?" >> $W/plan-candidates.txt
save
tail -5 $W/plan-bench.txt
grep -E "re-plans|cold start \(|re-planning" $W/cold.txt
tail -16 $W/cold.txt
echo "elapsed $(( $(date +%s) - T0 )) s"
