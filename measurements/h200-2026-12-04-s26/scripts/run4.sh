#!/usr/bin/env bash
# H200 session 26, run 4: would an A packed four values a texel pay? Experiment build aquart
# (outputs wrong by design, never committed): run 2's v1 kernel issuing one A load for every four
# values it stages (a quarter of its A loads, as an A packed along K would need), by shape and with
# every tile 64 rows; against v1 and bfix+aquart-free builds of run 3. Outputs: $OUT/d.tgz.
set -u
cd "$(dirname "$0")/../../.."
T0=$(date +%s)
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
W=/tmp/d4; mkdir -p /tmp/bin $W
for b in v1 aquart; do xz -dc .devbin/$b.xz > /tmp/bin/$b; done; chmod +x /tmp/bin/*
save() { tar czf $OUT/d.tgz -C $W .; }
if [ ! -f /tmp/prefill.tspk ]; then
timeout 90 $PY scripts/make_scale_models.py models/scale --decoder 1.3b > $W/gen.txt 2>&1
timeout 60 /tmp/bin/v1 compile models/scale/lm/decoder.onnx -o /tmp/prefill.tspk --kv-cache 128 \
  --shape input_ids=1x128 --shape position_ids=1x128 --shape attention_mask=1x128 \
  > $W/prefill-compile.txt 2>&1; echo "rc $?" >> $W/prefill-compile.txt
fi
run() { env $3 timeout 40 /tmp/bin/$1 infer /tmp/prefill.tspk --fill-missing 1 --repeat 5 --profile 3 -o /tmp/p-$2 > $W/$2.txt 2>&1; echo "rc $?" >> $W/$2.txt; }
run v1 v1 X=1; run aquart aquart X=1; run aquart aquart64 TEXSTREAM_COOP_ROWS=64; run v1 v1r64 TEXSTREAM_COOP_ROWS=64
save
for n in v1 aquart aquart64 v1r64; do echo "== $n: $(grep -E 'repeat runs' $W/$n.txt)"; grep -E '^MatMul |^Gemm ' $W/$n.txt; grep -A8 "by op and shape" $W/$n.txt | grep -E "MatMul|Gemm" | head -5; done
echo "elapsed $(( $(date +%s) - T0 )) s"
