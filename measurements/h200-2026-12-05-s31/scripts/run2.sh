#!/usr/bin/env bash
# H200 session 31, run 2: the defaults run 1 chose, in one binary (.devbin/ts.xz): tensor-core
# MatMuls on 128 k a step with A packed four values a texel, split over reduction spans where the
# tiles leave half the multiprocessors idle; attention staging on every invocation only at four
# query blocks (the Whisper encoder), the loop kept at one (BERT, the prefill). `base` is them,
# `prev` main's choices before (TEXSTREAM_COOP_STEP_K=64 TEXSTREAM_MATMUL_PACKED_A=0
# TEXSTREAM_MATMUL_SPLIT_K=1). Models as in run 1, resident fp16, profiled; outputs compared; the
# decode step; PyTorch's Whisper baseline; kernel_matmul's tensor-core test (every choice by
# shape, fixed, and split into three spans) and kernel_attention after the encoders; the Whisper
# encoder's attention over other key span counts (TEXSTREAM_ATTENTION_SPLITS). Outputs:
# $OUT/d.tgz, saved after each part.
set -u
cd "$(dirname "$0")/../../.."
T0=$(date +%s)
left() { echo $(( 560 - ($(date +%s) - T0) )); }
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
W=/tmp/d2; mkdir -p /tmp/bin $W
for b in ts kmat katt; do xz -dc .devbin/$b.xz > /tmp/bin/$b; chmod +x /tmp/bin/$b; done
cfg() { case $1 in base) echo X=1;; prev) echo "TEXSTREAM_COOP_STEP_K=64 TEXSTREAM_MATMUL_PACKED_A=0 TEXSTREAM_MATMUL_SPLIT_K=1";; esac; }
save() { tar czf $OUT/d.tgz -C $W .; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $W/gpu.txt 2>&1
(timeout 150 $PY scripts/make_scale_models.py models/scale --decoder 1.3b > $W/gen.txt 2>&1; echo "rc $?" >> $W/gen.txt) &
GEN=$!
# The Whisper encoder as run 1 exported it (its PyTorch baseline is in run 1).
M=/tmp/wenc; timeout 100 $PY scripts/whisper_encoder_baseline.py $M > $W/torch_whisper.txt 2>&1
E=/tmp/enc; timeout 60 $PY scripts/make_scale_models.py $E --decoder 125m --reference > $W/gen_enc.txt 2>&1
# A warm-up so that the first measured run does not meet the clocks ramping up.
timeout 60 /tmp/bin/ts infer $M/encoder.onnx --input input_features=$M/input.npy --precision f16 --repeat 20 > /dev/null 2>&1
for n in base prev base; do
  e=$(cfg $n); s=$n; [ -e $W/bert_$n.txt ] && s=${n}2
  env $e timeout 60 /tmp/bin/ts infer $E/enc.onnx --input x=$E/features.npy --precision f16 --repeat 20 --profile 3 -o /tmp/enc-$s > $W/bert_$s.txt 2>&1; echo "rc $?" >> $W/bert_$s.txt
  env $e timeout 60 /tmp/bin/ts infer $M/encoder.onnx --input input_features=$M/input.npy --precision f16 --repeat 20 --profile 3 -o /tmp/wh-$s > $W/whisper_$s.txt 2>&1; echo "rc $?" >> $W/whisper_$s.txt
  save
done
# The tensor-core tests early: the machine's time may not last the whole script.
(cd vk-backend && timeout 150 /tmp/bin/kmat constant_b_on_cooperative_matrices_where_available > $W/kernel_matmul.txt 2>&1; echo "rc $?" >> $W/kernel_matmul.txt)
save
(cd vk-backend && timeout 40 /tmp/bin/katt > $W/kernel_attention.txt 2>&1; echo "rc $?" >> $W/kernel_attention.txt)
save
# The Whisper encoder's attention over 4, 6, 12 and 16 key spans (the rule picks 8).
for sp in 4 6 12 16; do
  TEXSTREAM_ATTENTION_SPLITS=$sp timeout 40 /tmp/bin/ts infer $M/encoder.onnx --input input_features=$M/input.npy --precision f16 --repeat 20 --profile 3 -o /tmp/wh-s$sp > $W/whisper_spans$sp.txt 2>&1; echo "rc $?" >> $W/whisper_spans$sp.txt
done
save
wait $GEN
timeout 90 /tmp/bin/ts compile models/scale/lm/decoder.onnx -o /tmp/prefill.tspk --kv-cache 128 \
  --shape input_ids=1x128 --shape position_ids=1x128 --shape attention_mask=1x128 \
  > $W/prefill-compile.txt 2>&1; echo "rc $?" >> $W/prefill-compile.txt
for n in base prev; do
  env $(cfg $n) timeout 40 /tmp/bin/ts infer /tmp/prefill.tspk --fill-missing 1 --repeat 10 --profile 3 -o /tmp/pp-$n > $W/prefill_$n.txt 2>&1; echo "rc $?" >> $W/prefill_$n.txt
  save
done
timeout 60 /tmp/bin/ts check workloads/assistant-scale.ron > $W/check-scale.txt 2>&1; echo "rc $?" >> $W/check-scale.txt
timeout 30 /tmp/bin/ts infer models/scale/lm/decoder.tspk --fill-missing 1 --repeat 20 --profile 5 -o /tmp/pd > $W/decode.txt 2>&1; echo "rc $?" >> $W/decode.txt
$PY - > $W/compare.txt 2>&1 <<'PYEOF'
import numpy as np
for p, o in (('enc', 'y.npy'), ('wh', 'last_hidden_state.npy'), ('pp', 'logits.npy')):
    try:
        x, y = np.load(f'/tmp/{p}-prev/{o}'), np.load(f'/tmp/{p}-base/{o}')
        print(p, 'prev vs base max diff', float(abs(x - y).max()), 'range', float(y.max() - y.min()))
    except Exception as e:
        print(p, 'not compared:', e)
PYEOF
save
tail -n 3 $W/kernel_matmul.txt $W/kernel_attention.txt
for f in bert whisper prefill; do for n in base prev base2; do [ -e $W/${f}_$n.txt ] || continue; echo "== $f $n"; grep -hE "repeat runs|^  MatMul |^  Gemm |^  Attention |^LayerNorm" $W/${f}_$n.txt; done; done
for sp in 4 6 12 16; do echo "== whisper spans $sp"; grep -hE "repeat runs|^  Attention " $W/whisper_spans$sp.txt; done
grep -hE "repeat runs|^LayerNormalization |^MatMul " $W/decode.txt
tail -n 3 $W/torch_whisper.txt
cat $W/compare.txt
echo "elapsed $(( $(date +%s) - T0 )) s"
