#!/usr/bin/env bash
# H200 session 28, run 1 (session 27's run 5, plus a build with the one-key/value-staging patch):
# assistant-scale.ron at a quarter, every policy with a resident reference,
# cold, 4 iterations, as runs 3-4: fcb7f6c's MinCool heap (planned's engine start, its
# re-plans) and `plan --bench`; then 538574f's subgroup reductions: the decode step, the prefill
# and the Whisper-tiny encoder with and without TEXSTREAM_NO_SUBGROUP_ARITHMETIC=1 (the
# LayerNormalization / Softmax rows of each profile), outputs compared; then ts1kv (main with
# /work/patches/attention_one_kv_staging.patch: a texel's four query heads sharing one key/value head
# stage its keys and values once) on the prefill, logits against main's, and the kernel_attention
# test binary built with that patch. Outputs: $OUT/d.tgz.
set -u
cd "$(dirname "$0")/../../.."
T0=$(date +%s)
left() { echo $(( 570 - ($(date +%s) - T0) )); }
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
W=/tmp/d1; mkdir -p /tmp/bin $W
for b in ts ts1kv katt1kv; do xz -dc .devbin/$b.xz > /tmp/bin/$b; chmod +x /tmp/bin/$b; done
save() { tar czf $OUT/d.tgz -C $W .; }
[ -f models/scale/lm/decoder.onnx.data ] || timeout 120 $PY scripts/make_scale_models.py models/scale --decoder 1.3b > $W/gen.txt 2>&1
timeout 120 /tmp/bin/ts check workloads/assistant-scale.ron > $W/check-scale.txt 2>&1; echo "rc $?" >> $W/check-scale.txt
echo "setup $(( $(date +%s) - T0 )) s" >> $W/gen.txt
save
P="workloads/assistant-scale.ron --cap 693MiB --page-time 25.3us --handoff 13.6us --reuse-lag 15"
timeout 60 /tmp/bin/ts plan $P --bench > $W/plan-bench.txt 2>&1; echo "rc $?" >> $W/plan-bench.txt
timeout 200 /tmp/bin/ts run workloads/assistant-scale.ron --all-policies \
  --resident-reference --cap 693MiB --iterations 4 --cold > $W/cold.txt 2>&1; echo "rc $?" >> $W/cold.txt
save
timeout 60 /tmp/bin/ts compile models/scale/lm/decoder.onnx -o /tmp/prefill.tspk --kv-cache 128 \
  --shape input_ids=1x128 --shape position_ids=1x128 --shape attention_mask=1x128 \
  > $W/prefill-compile.txt 2>&1; echo "rc $?" >> $W/prefill-compile.txt
M=/tmp/wenc; [ $(left) -gt 200 ] && timeout 100 $PY scripts/whisper_encoder_baseline.py $M > $W/torch_whisper.txt 2>&1
for v in sg:X=1 tree:TEXSTREAM_NO_SUBGROUP_ARITHMETIC=1; do
  n=${v%%:*}; e=${v#*:}
  [ $(left) -gt 60 ] || break
  env $e timeout 40 /tmp/bin/ts infer models/scale/lm/decoder.tspk --fill-missing 1 --repeat 20 --profile 5 -o /tmp/pd-$n > $W/decode_$n.txt 2>&1; echo "rc $?" >> $W/decode_$n.txt
  env $e timeout 40 /tmp/bin/ts infer /tmp/prefill.tspk --fill-missing 1 --repeat 10 --profile 3 -o /tmp/pp-$n > $W/prefill_$n.txt 2>&1; echo "rc $?" >> $W/prefill_$n.txt
  [ -f $M/encoder.onnx ] && env $e timeout 40 /tmp/bin/ts infer $M/encoder.onnx --input input_features=$M/input.npy --precision f16 --repeat 20 --profile 3 -o /tmp/wh-$n > $W/whisper_$n.txt 2>&1
  save
done
if [ $(left) -gt 50 ]; then
  timeout 30 /tmp/bin/ts1kv infer /tmp/prefill.tspk --fill-missing 1 --repeat 10 --profile 3 -o /tmp/pp-1kv > $W/prefill_1kv.txt 2>&1; echo "rc $?" >> $W/prefill_1kv.txt
  (cd vk-backend && timeout 60 /tmp/bin/katt1kv > $W/katt1kv.txt 2>&1; echo "rc $?" >> $W/katt1kv.txt)
fi
$PY -c "
import numpy as np, glob
for a, b in (('/tmp/pd-sg/logits.npy', '/tmp/pd-tree/logits.npy'), ('/tmp/pp-sg/logits.npy', '/tmp/pp-tree/logits.npy'), ('/tmp/pp-1kv/logits.npy', '/tmp/pp-sg/logits.npy')):
    try:
        x, y = np.load(a), np.load(b); print(a, 'vs', b, 'max diff', float(abs(x - y).max()), 'range', float(y.max() - y.min()))
    except Exception as e:
        print(a, b, 'not compared:', e)
" > $W/compare.txt 2>&1
save
tail -5 $W/plan-bench.txt
grep -E "re-plans|cold start \(" $W/cold.txt; tail -12 $W/cold.txt
grep -hE "repeat runs|^Attention" $W/prefill_1kv.txt; tail -3 $W/katt1kv.txt
for n in sg tree; do echo "== $n"; grep -hE "repeat runs|^LayerNormalization |^Softmax " $W/decode_$n.txt $W/prefill_$n.txt $W/whisper_$n.txt 2>/dev/null; done
cat $W/compare.txt
echo "elapsed $(( $(date +%s) - T0 )) s"
