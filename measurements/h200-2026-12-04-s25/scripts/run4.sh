#!/usr/bin/env bash
# H200 session 25, run 4: where the tensor-core attention's and MatMul's time goes, with an
# experiment build (never committed) whose push-constant flags switch parts of each kernel off
# (outputs then wrong by design). TEXSTREAM_ATTN_SKIP (attention_coop.comp): 1 no K/V loads, 2
# no mask loads, 4 no matrix products, 8 no exps, 16 no key loop at all. TEXSTREAM_MM_SKIP
# (matmul_const_coop.comp): 1 no A loads, 2 no B (atlas) loads, 4 no matrix products. Each on
# the 1.34 B decoder's 128-token prefill, profiled. Outputs: $OUT/d.tgz.
set -u
T0=$(date +%s)
cd "$(dirname "$0")/../../.."
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
W=/tmp/d; rm -rf $W; mkdir -p /tmp/bin $W
xz -dc .devbin/texstream.xz > /tmp/bin/ts && chmod +x /tmp/bin/*
save() { tar czf $OUT/d.tgz -C $W .; }
timeout 60 $PY scripts/make_scale_models.py models/scale --decoder 1.3b > $W/gen.txt 2>&1
timeout 60 /tmp/bin/ts compile models/scale/lm/decoder.onnx -o /tmp/prefill.tspk --kv-cache 128 \
  --shape input_ids=1x128 --shape position_ids=1x128 --shape attention_mask=1x128 \
  > $W/prefill-compile.txt 2>&1; echo "rc $?" >> $W/prefill-compile.txt
echo "setup $(( $(date +%s) - T0 )) s" >> $W/gen.txt
for s in 0 1 2 4 8 3 16; do
  TEXSTREAM_ATTN_SKIP=$s timeout 40 /tmp/bin/ts infer /tmp/prefill.tspk --fill-missing 1 --repeat 2 --profile 2 \
    -o /tmp/pp > $W/attn$s.txt 2>&1; echo "rc $?" >> $W/attn$s.txt
done
save
for s in 1 2 4 3; do
  TEXSTREAM_MM_SKIP=$s timeout 40 /tmp/bin/ts infer /tmp/prefill.tspk --fill-missing 1 --repeat 2 --profile 2 \
    -o /tmp/pp > $W/mm$s.txt 2>&1; echo "rc $?" >> $W/mm$s.txt
done
save
for s in 0 1 2 4 8 3 16; do echo "attn skip $s: $(grep -E '^Attention ' $W/attn$s.txt)"; done
for s in 0 1 2 4 3; do f=$W/mm$s.txt; [ $s = 0 ] && f=$W/attn0.txt; echo "mm skip $s: $(grep -E '\[1, 128, 2048\] -> \[1, 128, 6656\]' $f) | $(grep -E '^Gemm  .*6656\]' $f)"; done
echo "elapsed $(( $(date +%s) - T0 )) s"
