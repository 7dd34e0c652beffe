#!/usr/bin/env bash
# H200 session 31, run 1: session 30's run 2 (the tensor-core MatMul taking 128 k a step,
# TEXSTREAM_COOP_STEP_K=128, and A four values a texel through matmul_pack_a.comp,
# TEXSTREAM_MATMUL_PACKED_A=1, each alone and together, against main's defaults) plus the
# tensor-core attention staging its keys and values on every invocation of the workgroup with a
# chunk's loads issued before its stores (.devbin/ts.xz) against main at 5b9b550 (.devbin/ts0.xz,
# the first 128 invocations staging, one load at a time), and norms over the last axis holding
# rows of up to WG x 8 texels in registers (the Whisper encoder's 384-wide rows were read three
# times in a loop). Test binaries: kernel_matmul (every
# tensor-core case on both steps, packed and not) and kernel_attention (the new staging). Models:
# the BERT-base-shaped encoder, the Whisper-tiny encoder and the 1.34 B decoder's 128-token
# prefill, resident in fp16, profiled; outputs compared; the decode step. And `split`: the
# tensor-core MatMuls whose tiles leave multiprocessors idle split over reduction spans
# (TEXSTREAM_MATMUL_SPLIT_K=auto, matmul_const_coop*_splitk.comp + matmul_splitk_combine.comp),
# alone and on 128 k a step (`deepsplit`).
# Outputs: $OUT/d.tgz.
set -u
cd "$(dirname "$0")/../../.."
T0=$(date +%s)
left() { echo $(( 570 - ($(date +%s) - T0) )); }
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
W=/tmp/d1; mkdir -p /tmp/bin $W
for b in ts ts0 kmat katt; do xz -dc .devbin/$b.xz > /tmp/bin/$b; chmod +x /tmp/bin/$b; done
cfg() { case $1 in base|old) echo X=1;; deep) echo TEXSTREAM_COOP_STEP_K=128;; pa) echo TEXSTREAM_MATMUL_PACKED_A=1;; deeppa) echo "TEXSTREAM_COOP_STEP_K=128 TEXSTREAM_MATMUL_PACKED_A=1";; split) echo TEXSTREAM_MATMUL_SPLIT_K=auto;; deepsplit) echo "TEXSTREAM_COOP_STEP_K=128 TEXSTREAM_MATMUL_SPLIT_K=auto";; esac; }
bin() { [ $1 = old ] && echo /tmp/bin/ts0 || echo /tmp/bin/ts; }
save() { tar czf $OUT/d.tgz -C $W .; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $W/gpu.txt 2>&1
(timeout 150 $PY scripts/make_scale_models.py models/scale --decoder 1.3b > $W/gen.txt 2>&1; echo "rc $?" >> $W/gen.txt) &
GEN=$!
(cd vk-backend && timeout 100 /tmp/bin/kmat > $W/kernel_matmul.txt 2>&1; echo "rc $?" >> $W/kernel_matmul.txt)
(cd vk-backend && timeout 60 /tmp/bin/katt > $W/kernel_attention.txt 2>&1; echo "rc $?" >> $W/kernel_attention.txt)
save
M=/tmp/wenc; timeout 100 $PY scripts/whisper_encoder_baseline.py $M > $W/torch_whisper.txt 2>&1
E=/tmp/enc; timeout 60 $PY scripts/make_scale_models.py $E --decoder 125m --reference > $W/gen_enc.txt 2>&1
for n in old base split pa deep deeppa deepsplit; do
  e=$(cfg $n); b=$(bin $n)
  env $e timeout 60 $b infer $E/enc.onnx --input x=$E/features.npy --precision f16 --repeat 20 --profile 3 -o /tmp/enc-$n > $W/bert_$n.txt 2>&1; echo "rc $?" >> $W/bert_$n.txt
  env $e timeout 60 $b infer $M/encoder.onnx --input input_features=$M/input.npy --precision f16 --repeat 20 --profile 3 -o /tmp/wh-$n > $W/whisper_$n.txt 2>&1; echo "rc $?" >> $W/whisper_$n.txt
  save
done
wait $GEN
timeout 90 /tmp/bin/ts compile models/scale/lm/decoder.onnx -o /tmp/prefill.tspk --kv-cache 128 \
  --shape input_ids=1x128 --shape position_ids=1x128 --shape attention_mask=1x128 \
  > $W/prefill-compile.txt 2>&1; echo "rc $?" >> $W/prefill-compile.txt
for n in old base split deep deepsplit pa deeppa; do
  [ $(left) -gt 100 ] || break
  env $(cfg $n) timeout 40 $(bin $n) infer /tmp/prefill.tspk --fill-missing 1 --repeat 10 --profile 3 -o /tmp/pp-$n > $W/prefill_$n.txt 2>&1; echo "rc $?" >> $W/prefill_$n.txt
  save
done
# The decode step as session 29's run 1 measured it (its residual norms are new since).
if [ $(left) -gt 90 ]; then
timeout 60 /tmp/bin/ts check workloads/assistant-scale.ron > $W/check-scale.txt 2>&1; echo "rc $?" >> $W/check-scale.txt
timeout 30 /tmp/bin/ts infer models/scale/lm/decoder.tspk --fill-missing 1 --repeat 20 --profile 5 -o /tmp/pd > $W/decode.txt 2>&1; echo "rc $?" >> $W/decode.txt
fi
$PY - > $W/compare.txt 2>&1 <<'PYEOF'
import numpy as np
for a, b in [(f'/tmp/{p}-old/{o}', f'/tmp/{p}-{v}/{o}') for p, o in (('enc', 'y.npy'), ('wh', 'last_hidden_state.npy'), ('pp', 'logits.npy')) for v in ('base', 'split', 'pa', 'deep', 'deeppa', 'deepsplit')]:
    try:
        x, y = np.load(a), np.load(b); print(a, 'vs', b, 'max diff', float(abs(x - y).max()), 'range', float(y.max() - y.min()))
    except Exception as e:
        print(a, b, 'not compared:', e)
PYEOF
save
tail -4 $W/kernel_matmul.txt; tail -4 $W/kernel_attention.txt
for f in bert whisper prefill; do for n in old base split pa deep deeppa deepsplit; do echo "== $f $n"; grep -hE "repeat runs|^  MatMul |^  Gemm |^  Attention " $W/${f}_$n.txt 2>/dev/null; done; done
grep -hE "repeat runs|^LayerNormalization |^Binary " $W/decode.txt 2>/dev/null
tail -3 $W/torch_whisper.txt
cat $W/compare.txt
echo "elapsed $(( $(date +%s) - T0 )) s"
