#!/usr/bin/env bash
# H200 session 32, run 2 (binary at 935ee4f, .devbin2/): the norm kernels by row shape and the
# one-pass tensor-core attention. First vk-backend's kernel_norm (row groups on subgroups of
# 32) and kernel_attention (every tensor-core case in one pass too, and a case that rescales at
# every key block). Then chains of residual LayerNorms (norm_chain.py: 48 norms of a decoder
# step's [1, 1, 2048] and of a 128-token prefill's [1, 128, 2048], 24 of the Whisper-tiny
# encoder's [1, 1500, 384]) by shape (`new`: wide rows, row groups) against one workgroup of
# 256 a row (`one`: TEXSTREAM_NORM_WIDE_ROWS=0 / TEXSTREAM_NORM_ROW_GROUPS=0), alternating.
# Then the Whisper-tiny encoder and the BERT-base-shaped encoder: `base` (by shape), `one`
# (the norms one workgroup a row), `onepass` (TEXSTREAM_ATTENTION_ONE_PASS=1), alternating.
# Outputs against ONNX Runtime CPU fp32 (chains) and against `base`. $OUT/d.tgz after each part.
set -u
cd "$(dirname "$0")/../../.."
T0=$(date +%s)
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
S=measurements/h200-2026-12-05-s32/scripts
W=/tmp/d2; mkdir -p /tmp/bin $W
for b in ts knorm katt; do xz -dc .devbin2/$b.xz > /tmp/bin/$b; chmod +x /tmp/bin/$b; done
save() { tar czf $OUT/d.tgz -C $W .; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $W/gpu.txt 2>&1
(cd vk-backend && timeout 60 /tmp/bin/knorm > $W/kernel_norm.txt 2>&1; echo "rc $?" >> $W/kernel_norm.txt)
(cd vk-backend && timeout 60 /tmp/bin/katt > $W/kernel_attention.txt 2>&1; echo "rc $?" >> $W/kernel_attention.txt)
save
(timeout 100 $PY scripts/whisper_encoder_baseline.py /tmp/wenc > $W/torch_whisper.txt 2>&1) &
TW=$!
E=/tmp/enc; timeout 60 $PY scripts/make_scale_models.py $E --decoder 125m --reference > $W/gen_enc.txt 2>&1
for c in "dec 1 2048 48" "pre 128 2048 48" "wh 1500 384 24"; do
  set -- $c; $PY $S/norm_chain.py /tmp/nc-$1 $2 $3 $4 >> $W/gen.txt 2>&1
done
wait $TW
# A warm-up so that the first measured run does not meet the clocks ramping up.
timeout 60 /tmp/bin/ts infer /tmp/nc-pre/chain.onnx --input x=/tmp/nc-pre/x.npy --precision f16 --repeat 50 -o /tmp/warm > /dev/null 2>&1
off() { case $1 in dec|pre) echo TEXSTREAM_NORM_WIDE_ROWS=0;; *) echo TEXSTREAM_NORM_ROW_GROUPS=0;; esac; }
for m in dec pre wh; do
  for n in new one new one; do
    e=X=1; [ $n = one ] && e=$(off $m)
    s=$n; [ -e $W/chain_${m}_$n.txt ] && s=${n}2
    env $e timeout 60 /tmp/bin/ts infer /tmp/nc-$m/chain.onnx --input x=/tmp/nc-$m/x.npy --precision f16 --repeat 20 --profile 3 -o /tmp/nco-$m-$s > $W/chain_${m}_$s.txt 2>&1; echo "rc $?" >> $W/chain_${m}_$s.txt
  done
  save
done
cfg() { case $1 in base) echo X=1;; one) echo TEXSTREAM_NORM_ROW_GROUPS=0;; onepass) echo TEXSTREAM_ATTENTION_ONE_PASS=1;; esac; }
M=/tmp/wenc
for n in base one onepass base one onepass; do
  s=$n; [ -e $W/whisper_$n.txt ] && s=${n}2
  env $(cfg $n) timeout 60 /tmp/bin/ts infer $M/encoder.onnx --input input_features=$M/input.npy --precision f16 --repeat 20 --profile 3 -o /tmp/wh-$s > $W/whisper_$s.txt 2>&1; echo "rc $?" >> $W/whisper_$s.txt
  save
done
for n in base onepass base onepass; do
  s=$n; [ -e $W/bert_$n.txt ] && s=${n}2
  env $(cfg $n) timeout 60 /tmp/bin/ts infer $E/enc.onnx --input x=$E/features.npy --precision f16 --repeat 20 --profile 3 -o /tmp/enc-$s > $W/bert_$s.txt 2>&1; echo "rc $?" >> $W/bert_$s.txt
done
save
$PY - > $W/compare.txt 2>&1 <<'PYEOF'
import numpy as np
for m in ('dec', 'pre', 'wh'):
    ref = np.load(f'/tmp/nc-{m}/ort_y.npy')
    for s in ('new', 'one'):
        try:
            y = np.load(f'/tmp/nco-{m}-{s}/y.npy')
            print(m, s, 'vs ORT fp32 max diff', float(abs(y - ref).max()), 'range', float(ref.max() - ref.min()))
        except Exception as e:
            print(m, s, 'not compared:', e)
for p, o, alts in (('wh', 'last_hidden_state.npy', ('one', 'onepass')), ('enc', 'y.npy', ('onepass',))):
    for a in alts:
        try:
            x, y = np.load(f'/tmp/{p}-base/{o}'), np.load(f'/tmp/{p}-{a}/{o}')
            print(p, a, 'vs base max diff', float(abs(x - y).max()), 'range', float(x.max() - x.min()))
        except Exception as e:
            print(p, a, 'not compared:', e)
PYEOF
save
tail -n 3 $W/kernel_norm.txt $W/kernel_attention.txt
for f in chain_dec chain_pre chain_wh; do for s in new one new2 one2; do echo "== $f $s"; grep -hE "repeat runs|^LayerNormalization " $W/${f}_$s.txt; done; done
for s in base one onepass base2 one2 onepass2; do echo "== whisper $s"; grep -hE "repeat runs|^LayerNormalization |^Attention " $W/whisper_$s.txt; done
for s in base onepass base2 onepass2; do echo "== bert $s"; grep -hE "repeat runs|^LayerNormalization |^Attention " $W/bert_$s.txt; done
tail -n 3 $W/torch_whisper.txt; cat $W/compare.txt
echo "elapsed $(( $(date +%s) - T0 )) s"
