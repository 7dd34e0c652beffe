#!/usr/bin/env bash
# Session 33, run 1 (binary at a0d00a9, .devbin3/): outputs read back as dense values packed on
# the device (`dense`, the default) against copies of their texels (`texel`:
# TEXSTREAM_DENSE_READBACK=0), alternating, on the Whisper-tiny encoder, the BERT-base-shaped
# encoder, the 1.34 B decoder's 128-token prefill and its decode step (`texstream infer MODEL
# --precision f16 --repeat 20 --profile 3`, resident); the Whisper encoder under the tiling
# choices the device options fix (32-row MatMul tiles, small convolution tiles, attention over 2
# key spans, 2 reduction spans); PyTorch fp16 on the Whisper encoder and on the 1.34 B decoder
# (prefill and decode, CUDA graph and eager) on the same card; vk-backend's tensor_roundtrip
# (dense readback checked against the uploaded values). $OUT/d.tgz after each part.
set -u
cd "$(dirname "$0")/../../.."
T0=$(date +%s)
left() { echo $(( 575 - ($(date +%s) - T0) )); }
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
W=/tmp/d3; mkdir -p /tmp/bin $W
for b in ts troundtrip; do xz -dc .devbin3/$b.xz > /tmp/bin/$b; chmod +x /tmp/bin/$b; done
save() { tar czf $OUT/d.tgz -C $W .; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $W/gpu.txt 2>&1
(timeout 170 $PY scripts/make_scale_models.py models/scale --decoder 1.3b > $W/gen.txt 2>&1; echo "rc $?" >> $W/gen.txt) &
GEN=$!
(timeout 100 $PY scripts/whisper_encoder_baseline.py /tmp/wenc > $W/torch_whisper.txt 2>&1) &
TW=$!
E=/tmp/enc; (timeout 60 $PY scripts/make_scale_models.py $E --decoder 125m --reference > $W/gen_enc.txt 2>&1) &
GE=$!
(cd vk-backend && timeout 60 /tmp/bin/troundtrip > $W/tensor_roundtrip.txt 2>&1; echo "rc $?" >> $W/tensor_roundtrip.txt)
save
cfg() { case $1 in dense) echo X=1;; texel) echo TEXSTREAM_DENSE_READBACK=0;; rows32) echo TEXSTREAM_COOP_ROWS=32;;
  convsmall) echo TEXSTREAM_COOP_CONV_TILE=small;; attsplit2) echo TEXSTREAM_ATTENTION_SPLITS=2;; splitk2) echo TEXSTREAM_MATMUL_SPLIT_K=2;; esac; }
wait $TW
M=/tmp/wenc
# A warm-up so that the first measured run does not meet the clocks ramping up.
timeout 60 /tmp/bin/ts infer $M/encoder.onnx --input input_features=$M/input.npy --precision f16 --repeat 50 -o /tmp/warm > /dev/null 2>&1
for n in dense texel dense texel rows32 convsmall attsplit2 splitk2; do
  s=$n; [ -e $W/whisper_$n.txt ] && s=${n}2
  env $(cfg $n) timeout 40 /tmp/bin/ts infer $M/encoder.onnx --input input_features=$M/input.npy --precision f16 --repeat 20 --profile 3 -o /tmp/wh-$s > $W/whisper_$s.txt 2>&1; echo "rc $?" >> $W/whisper_$s.txt
done
save
wait $GE
for n in dense texel dense texel; do
  s=$n; [ -e $W/bert_$n.txt ] && s=${n}2
  env $(cfg $n) timeout 40 /tmp/bin/ts infer $E/enc.onnx --input x=$E/features.npy --precision f16 --repeat 20 --profile 3 -o /tmp/enc-$s > $W/bert_$s.txt 2>&1; echo "rc $?" >> $W/bert_$s.txt
done
save
wait $GEN
if [ $(left) -gt 200 ]; then
  timeout 100 /tmp/bin/ts compile models/scale/lm/decoder.onnx -o /tmp/prefill.tspk --kv-cache 128 \
    --shape input_ids=1x128 --shape position_ids=1x128 --shape attention_mask=1x128 \
    > $W/prefill-compile.txt 2>&1; echo "rc $?" >> $W/prefill-compile.txt
  for n in dense texel dense texel; do
    [ $(left) -gt 170 ] || break
    s=$n; [ -e $W/prefill_$n.txt ] && s=${n}2
    env $(cfg $n) timeout 40 /tmp/bin/ts infer /tmp/prefill.tspk --fill-missing 1 --repeat 10 --profile 3 -o /tmp/pp-$s > $W/prefill_$s.txt 2>&1; echo "rc $?" >> $W/prefill_$s.txt
  done
  save
fi
if [ $(left) -gt 150 ]; then
  for n in dense texel; do
    env $(cfg $n) timeout 30 /tmp/bin/ts infer models/scale/lm/decoder.tspk --fill-missing 1 --repeat 20 --profile 5 -o /tmp/pd-$n > $W/decode_$n.txt 2>&1; echo "rc $?" >> $W/decode_$n.txt
  done
  save
fi
$PY - > $W/compare.txt 2>&1 <<'PYEOF'
import numpy as np
for p, o, alts in (('wh', 'last_hidden_state.npy', ('texel', 'rows32', 'convsmall', 'attsplit2', 'splitk2')),
                   ('enc', 'y.npy', ('texel',)), ('pp', 'logits.npy', ('texel',)), ('pd', 'logits.npy', ('texel',))):
    for a in alts:
        try:
            x, y = np.load(f'/tmp/{p}-dense/{o}'), np.load(f'/tmp/{p}-{a}/{o}')
            print(p, a, 'vs dense: max diff', float(abs(x - y).max()), 'range', float(x.max() - x.min()), 'shape', x.shape)
        except Exception as e:
            print(p, a, 'not compared:', e)
PYEOF
save
if [ $(left) -gt 120 ]; then
  timeout $(( $(left) - 15 )) $PY scripts/torch_baseline.py $W/torch_lm13.json --smollm2 models/scale/lm \
    --no-whisper --no-compile --iters 10 --decode-steps 32 --lm-steps 16 > $W/torch_lm13.txt 2>&1
  echo "torch_baseline: rc $?" >> $W/torch_lm13.txt
  save
fi
tail -n 3 $W/tensor_roundtrip.txt
for f in whisper bert prefill decode; do for s in dense texel dense2 texel2 rows32 convsmall attsplit2 splitk2; do [ -e $W/${f}_$s.txt ] || continue; echo "== $f $s"; grep -hE "repeat runs|^Attention |^MatMul |^Conv " $W/${f}_$s.txt; done; done
tail -n 3 $W/torch_whisper.txt; cat $W/compare.txt; grep -E "ms|rc" $W/torch_lm13.txt | tail -12
echo "elapsed $(( $(date +%s) - T0 )) s"
