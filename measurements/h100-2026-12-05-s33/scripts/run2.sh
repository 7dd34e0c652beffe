#!/usr/bin/env bash
# Session 33, run 2: the weight atlas read as a sampled image (texelFetch) against a storage
# image (imageLoad). `A`: .devbin3/ts (a0d00a9, imageLoad), `B`: .devbin4/ts (texelFetch through
# a SAMPLED_IMAGE descriptor; every other line the same), alternating, on the Whisper-tiny
# encoder, the BERT-base-shaped encoder, the 1.34 B decoder's 128-token prefill and its decode
# step (`texstream infer MODEL --precision f16 --repeat 20 --profile 3`, resident); outputs of
# A and B compared; vk-backend's kernel_norm and kernel_matmul's tensor-core test on B.
set -u
cd "$(dirname "$0")/../../.."
T0=$(date +%s)
left() { echo $(( 575 - ($(date +%s) - T0) )); }
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
W=/tmp/d4; mkdir -p /tmp/bin $W
xz -dc .devbin3/ts.xz > /tmp/bin/A; xz -dc .devbin4/ts.xz > /tmp/bin/B
for b in kmat knorm; do xz -dc .devbin4/$b.xz > /tmp/bin/$b; done; chmod +x /tmp/bin/*
save() { tar czf $OUT/d.tgz -C $W .; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $W/gpu.txt 2>&1
(timeout 170 $PY scripts/make_scale_models.py models/scale --decoder 1.3b > $W/gen.txt 2>&1; echo "rc $?" >> $W/gen.txt) &
GEN=$!
(timeout 100 $PY scripts/whisper_encoder_baseline.py /tmp/wenc --iters 3 > $W/torch_whisper.txt 2>&1) &
TW=$!
E=/tmp/enc; (timeout 60 $PY scripts/make_scale_models.py $E --decoder 125m --reference > $W/gen_enc.txt 2>&1) &
GE=$!
(cd vk-backend && timeout 60 /tmp/bin/knorm > $W/kernel_norm.txt 2>&1; echo "rc $?" >> $W/kernel_norm.txt)
save
wait $TW
M=/tmp/wenc
timeout 60 /tmp/bin/A infer $M/encoder.onnx --input input_features=$M/input.npy --precision f16 --repeat 50 -o /tmp/warm > /dev/null 2>&1
for n in A B A B; do
  s=$n; [ -e $W/whisper_$n.txt ] && s=${n}2
  timeout 40 /tmp/bin/$n infer $M/encoder.onnx --input input_features=$M/input.npy --precision f16 --repeat 20 --profile 3 -o /tmp/wh-$s > $W/whisper_$s.txt 2>&1; echo "rc $?" >> $W/whisper_$s.txt
done
save
wait $GE
for n in A B A B; do
  s=$n; [ -e $W/bert_$n.txt ] && s=${n}2
  timeout 40 /tmp/bin/$n infer $E/enc.onnx --input x=$E/features.npy --precision f16 --repeat 20 --profile 3 -o /tmp/enc-$s > $W/bert_$s.txt 2>&1; echo "rc $?" >> $W/bert_$s.txt
done
save
wait $GEN
timeout 100 /tmp/bin/B compile models/scale/lm/decoder.onnx -o /tmp/prefill.tspk --kv-cache 128 \
  --shape input_ids=1x128 --shape position_ids=1x128 --shape attention_mask=1x128 \
  > $W/prefill-compile.txt 2>&1; echo "rc $?" >> $W/prefill-compile.txt
timeout 60 /tmp/bin/B check workloads/assistant-scale.ron > $W/check-scale.txt 2>&1; echo "rc $?" >> $W/check-scale.txt
for n in A B A B; do
  [ $(left) -gt 200 ] || break
  s=$n; [ -e $W/prefill_$n.txt ] && s=${n}2
  timeout 40 /tmp/bin/$n infer /tmp/prefill.tspk --fill-missing 1 --repeat 10 --profile 3 -o /tmp/pp-$s > $W/prefill_$s.txt 2>&1; echo "rc $?" >> $W/prefill_$s.txt
done
save
for n in A B A B; do
  [ $(left) -gt 170 ] || break
  s=$n; [ -e $W/decode_$n.txt ] && s=${n}2
  timeout 30 /tmp/bin/$n infer models/scale/lm/decoder.tspk --fill-missing 1 --repeat 20 --profile 5 -o /tmp/pd-$s > $W/decode_$s.txt 2>&1; echo "rc $?" >> $W/decode_$s.txt
done
save
$PY - > $W/compare.txt 2>&1 <<'PYEOF'
import numpy as np
for p, o in (('wh', 'last_hidden_state.npy'), ('enc', 'y.npy'), ('pp', 'logits.npy'), ('pd', 'logits.npy')):
    try:
        x, y = np.load(f'/tmp/{p}-A/{o}'), np.load(f'/tmp/{p}-B/{o}')
        print(p, 'B vs A: max diff', float(abs(x - y).max()), 'range', float(x.max() - x.min()), 'shape', x.shape)
    except Exception as e:
        print(p, 'not compared:', e)
PYEOF
save
if [ $(left) -gt 60 ]; then
  (cd vk-backend && timeout $(( $(left) - 10 )) /tmp/bin/kmat constant_b_on_cooperative_matrices_where_available > $W/kernel_matmul.txt 2>&1; echo "rc $?" >> $W/kernel_matmul.txt)
  save
fi
tail -n 3 $W/kernel_norm.txt $W/kernel_matmul.txt
for f in whisper bert prefill decode; do for s in A B A2 B2; do [ -e $W/${f}_$s.txt ] || continue; echo "== $f $s"; grep -hE "repeat runs|^Attention |^MatMul |^Conv |^LayerNorm|^Gemm " $W/${f}_$s.txt; done; done
cat $W/compare.txt
echo "elapsed $(( $(date +%s) - T0 )) s"
