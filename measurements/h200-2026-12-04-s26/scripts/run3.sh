#!/usr/bin/env bash
# H200 session 26, run 3: where a tensor-core MatMul step's time goes. Experiment builds of run 2's
# v1 kernel (outputs wrong by design, never committed): bfix reads B's first 64 k every step (its
# loads always hit the cache), afix the same for A, abfix both, nomma stages every step but
# multiplies nothing. The 1.34 B decoder's 128-token prefill profiled with each and with v1.
# Outputs: $OUT/d.tgz.
set -u
cd "$(dirname "$0")/../../.."
T0=$(date +%s)
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
W=/tmp/d3; mkdir -p /tmp/bin $W
for b in v1 bfix afix abfix nomma; do xz -dc .devbin/$b.xz > /tmp/bin/$b; done; chmod +x /tmp/bin/*
save() { tar czf $OUT/d.tgz -C $W .; }
if [ ! -f /tmp/prefill.tspk ]; then
timeout 90 $PY scripts/make_scale_models.py models/scale --decoder 1.3b > $W/gen.txt 2>&1
timeout 60 /tmp/bin/v1 compile models/scale/lm/decoder.onnx -o /tmp/prefill.tspk --kv-cache 128 \
  --shape input_ids=1x128 --shape position_ids=1x128 --shape attention_mask=1x128 \
  > $W/prefill-compile.txt 2>&1; echo "rc $?" >> $W/prefill-compile.txt
fi
run() { env $3 timeout 40 /tmp/bin/$1 infer /tmp/prefill.tspk --fill-missing 1 --repeat 5 --profile 3 -o /tmp/p-$2 > $W/$2.txt 2>&1; echo "rc $?" >> $W/$2.txt; }
for n in v1 bfix afix abfix nomma; do run $n $n X=1; done
save
for n in v1 bfix afix abfix nomma; do echo "== $n: $(grep -E 'repeat runs' $W/$n.txt)"; grep -E '^MatMul |^Gemm ' $W/$n.txt; grep -A8 "by op and shape" $W/$n.txt | grep -E "MatMul|Gemm" | head -5; done
echo "elapsed $(( $(date +%s) - T0 )) s"
