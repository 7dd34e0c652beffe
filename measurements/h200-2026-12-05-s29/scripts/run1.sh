#!/usr/bin/env bash
# H200 session 29, run 1: what sessions 27 and 28 built and could not run here. First the
# kernel_attention test binary of main (b1329cf; .devbin/katt.xz): the tensor-core attention
# reading Q, K and V from the projections' rows (b6842a5) has run nowhere else (lavapipe has no
# cooperative matrices). Then the two encoders (the Whisper-tiny encoder as Hugging Face exports it,
# scripts/whisper_encoder_baseline.py, and the BERT-base-shaped one, make_scale_models.py --decoder
# 125m) resident in fp16, 30 repeats and a 3-run profile, two ways: `rows` (main) and `copies`
# (TEXSTREAM_ATTENTION_HEAD_COPIES=1: the split operands copied into heads before the kernel).
# Then session 27's run 5: assistant-scale.ron at a quarter, cold, every policy (fcb7f6c's MinCool
# heap), `plan --bench`, and 538574f's subgroup reductions against the shared-memory tree
# (TEXSTREAM_NO_SUBGROUP_ARITHMETIC=1) on the 1.34 B decode step and its 128-token prefill.
# Outputs: $OUT/d.tgz.
set -u
cd "$(dirname "$0")/../../.."
T0=$(date +%s)
left() { echo $(( 570 - ($(date +%s) - T0) )); }
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
W=/tmp/d1; mkdir -p /tmp/bin $W
for b in ts katt; do xz -dc .devbin/$b.xz > /tmp/bin/$b; chmod +x /tmp/bin/$b; done
save() { tar czf $OUT/d.tgz -C $W .; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $W/gpu.txt 2>&1
(cd vk-backend && timeout 120 /tmp/bin/katt > $W/kernel_attention.txt 2>&1; echo "rc $?" >> $W/kernel_attention.txt)
save
M=/tmp/wenc; timeout 100 $PY scripts/whisper_encoder_baseline.py $M > $W/torch_whisper.txt 2>&1
E=/tmp/enc; timeout 60 $PY scripts/make_scale_models.py $E --decoder 125m --reference > $W/gen_enc.txt 2>&1
for v in rows:X=1 copies:TEXSTREAM_ATTENTION_HEAD_COPIES=1; do
  n=${v%%:*}; e=${v#*:}
  env $e timeout 60 /tmp/bin/ts infer $M/encoder.onnx --input input_features=$M/input.npy --precision f16 --repeat 30 --profile 3 -o /tmp/wh-$n > $W/whisper_$n.txt 2>&1; echo "rc $?" >> $W/whisper_$n.txt
  env $e timeout 60 /tmp/bin/ts infer $E/enc.onnx --input x=$E/features.npy --precision f16 --repeat 30 --profile 3 -o /tmp/enc-$n > $W/bert_$n.txt 2>&1; echo "rc $?" >> $W/bert_$n.txt
  save
done
$PY - > $W/compare.txt 2>&1 <<'PYEOF'
import numpy as np, glob
for a, b in (('/tmp/wh-copies/last_hidden_state.npy', '/tmp/wh-rows/last_hidden_state.npy'), ('/tmp/enc-copies/y.npy', '/tmp/enc-rows/y.npy')):
    try:
        x, y = np.load(a), np.load(b); print(a, 'vs', b, 'max diff', float(abs(x - y).max()), 'range', float(y.max() - y.min()))
    except Exception as e:
        print(a, b, 'not compared:', e)
PYEOF
save
[ -f models/scale/lm/decoder.onnx.data ] || timeout 150 $PY scripts/make_scale_models.py models/scale --decoder 1.3b > $W/gen.txt 2>&1
timeout 120 /tmp/bin/ts check workloads/assistant-scale.ron > $W/check-scale.txt 2>&1; echo "rc $?" >> $W/check-scale.txt
P="workloads/assistant-scale.ron --cap 693MiB --page-time 25.3us --handoff 13.6us --reuse-lag 15"
timeout 60 /tmp/bin/ts plan $P --bench > $W/plan-bench.txt 2>&1; echo "rc $?" >> $W/plan-bench.txt
save
[ $(left) -gt 230 ] && { timeout 200 /tmp/bin/ts run workloads/assistant-scale.ron --all-policies \
  --resident-reference --cap 693MiB --iterations 4 --cold > $W/cold.txt 2>&1; echo "rc $?" >> $W/cold.txt; }
save
timeout 60 /tmp/bin/ts compile models/scale/lm/decoder.onnx -o /tmp/prefill.tspk --kv-cache 128 \
  --shape input_ids=1x128 --shape position_ids=1x128 --shape attention_mask=1x128 \
  > $W/prefill-compile.txt 2>&1; echo "rc $?" >> $W/prefill-compile.txt
for v in sg:X=1 tree:TEXSTREAM_NO_SUBGROUP_ARITHMETIC=1; do
  n=${v%%:*}; e=${v#*:}
  [ $(left) -gt 40 ] || break
  env $e timeout 40 /tmp/bin/ts infer models/scale/lm/decoder.tspk --fill-missing 1 --repeat 20 --profile 5 -o /tmp/pd-$n > $W/decode_$n.txt 2>&1; echo "rc $?" >> $W/decode_$n.txt
  env $e timeout 40 /tmp/bin/ts infer /tmp/prefill.tspk --fill-missing 1 --repeat 10 --profile 3 -o /tmp/pp-$n > $W/prefill_$n.txt 2>&1; echo "rc $?" >> $W/prefill_$n.txt
  save
done
$PY - >> $W/compare.txt 2>&1 <<'PYEOF'
import numpy as np
for a, b in (('/tmp/pd-tree/logits.npy', '/tmp/pd-sg/logits.npy'), ('/tmp/pp-tree/logits.npy', '/tmp/pp-sg/logits.npy')):
    try:
        x, y = np.load(a), np.load(b); print(a, 'vs', b, 'max diff', float(abs(x - y).max()), 'range', float(y.max() - y.min()))
    except Exception as e:
        print(a, b, 'not compared:', e)
PYEOF
save
tail -4 $W/kernel_attention.txt
for n in rows copies; do echo "== $n"; grep -hE "layout transforms|repeat runs|^Reshape |^Transpose |^Copy |^Attention " $W/whisper_$n.txt $W/bert_$n.txt; done
tail -3 $W/torch_whisper.txt
tail -5 $W/plan-bench.txt
grep -E "re-plans|cold start \(" $W/cold.txt; tail -12 $W/cold.txt
for n in sg tree; do echo "== $n"; grep -hE "repeat runs|^LayerNormalization |^Softmax |^RMSNorm|^SimplifiedLayer" $W/decode_$n.txt $W/prefill_$n.txt 2>/dev/null; done
cat $W/compare.txt
echo "elapsed $(( $(date +%s) - T0 )) s"
