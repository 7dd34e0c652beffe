#!/usr/bin/env bash
# Session 32, run 1 (ran on an H100: no H200 was lent) (binary at 935ee4f, .devbin2/): session 31's defaults together (never run
# together: its run 2 found no machine) and this session's kernels, each against the choice
# before it in the same run, alternating:
# - vk-backend's kernel_norm (row groups on subgroups of 32, wide rows) and kernel_attention
#   (every tensor-core case in one pass too, and a case that rescales at every key block) first;
#   kernel_matmul's tensor-core test (split reductions) last.
# - Chains of residual LayerNorms (norm_chain.py: 48 norms of a decoder step's [1, 1, 2048] and
#   of a 128-token prefill's [1, 128, 2048], 24 of the Whisper-tiny encoder's [1, 1500, 384]),
#   by shape (`new`: wide rows, row groups) against one workgroup of 256 a row (`one`).
# - The Whisper-tiny encoder, the BERT-base-shaped encoder, the 1.34 B decoder's 128-token
#   prefill and its decode step: `base` (by shape), `one` (norms one workgroup a row),
#   `onepass` (TEXSTREAM_ATTENTION_ONE_PASS=1), `prev` (session 30's MatMul choices:
#   TEXSTREAM_COOP_STEP_K=64 TEXSTREAM_MATMUL_PACKED_A=0 TEXSTREAM_MATMUL_SPLIT_K=1).
# Outputs against ONNX Runtime CPU fp32 (chains) and against `base`. $OUT/d.tgz after each part.
set -u
cd "$(dirname "$0")/../../.."
T0=$(date +%s)
left() { echo $(( 575 - ($(date +%s) - T0) )); }
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
S=measurements/h100-2026-12-05-s32/scripts
W=/tmp/d2; mkdir -p /tmp/bin $W
for b in ts knorm katt kmat; do xz -dc .devbin2/$b.xz > /tmp/bin/$b; chmod +x /tmp/bin/$b; done
save() { tar czf $OUT/d.tgz -C $W .; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $W/gpu.txt 2>&1
(timeout 170 $PY scripts/make_scale_models.py models/scale --decoder 1.3b > $W/gen.txt 2>&1; echo "rc $?" >> $W/gen.txt) &
GEN=$!
(timeout 100 $PY scripts/whisper_encoder_baseline.py /tmp/wenc > $W/torch_whisper.txt 2>&1) &
TW=$!
E=/tmp/enc; (timeout 60 $PY scripts/make_scale_models.py $E --decoder 125m --reference > $W/gen_enc.txt 2>&1) &
(cd vk-backend && timeout 60 /tmp/bin/knorm > $W/kernel_norm.txt 2>&1; echo "rc $?" >> $W/kernel_norm.txt)
(cd vk-backend && timeout 60 /tmp/bin/katt > $W/kernel_attention.txt 2>&1; echo "rc $?" >> $W/kernel_attention.txt)
save
for c in "dec 1 2048 48" "pre 128 2048 48" "wh 1500 384 24"; do
  set -- $c; $PY $S/norm_chain.py /tmp/nc-$1 $2 $3 $4 >> $W/gen_chain.txt 2>&1
done
# A warm-up so that the first measured run does not meet the clocks ramping up.
timeout 60 /tmp/bin/ts infer /tmp/nc-pre/chain.onnx --input x=/tmp/nc-pre/x.npy --precision f16 --repeat 50 -o /tmp/warm > /dev/null 2>&1
off() { case $1 in dec|pre) echo TEXSTREAM_NORM_WIDE_ROWS=0;; *) echo TEXSTREAM_NORM_ROW_GROUPS=0;; esac; }
for m in dec pre wh; do
  for n in new one new one; do
    e=X=1; [ $n = one ] && e=$(off $m)
    s=$n; [ -e $W/chain_${m}_$n.txt ] && s=${n}2
    env $e timeout 30 /tmp/bin/ts infer /tmp/nc-$m/chain.onnx --input x=/tmp/nc-$m/x.npy --precision f16 --repeat 20 --profile 3 -o /tmp/nco-$m-$s > $W/chain_${m}_$s.txt 2>&1; echo "rc $?" >> $W/chain_${m}_$s.txt
  done
done
save
cfg() { case $1 in base) echo X=1;; one) echo TEXSTREAM_NORM_ROW_GROUPS=0 TEXSTREAM_NORM_WIDE_ROWS=0;; onepass) echo TEXSTREAM_ATTENTION_ONE_PASS=1;; prev) echo "TEXSTREAM_COOP_STEP_K=64 TEXSTREAM_MATMUL_PACKED_A=0 TEXSTREAM_MATMUL_SPLIT_K=1";; esac; }
wait $TW
M=/tmp/wenc
for n in base one onepass base one onepass; do
  s=$n; [ -e $W/whisper_$n.txt ] && s=${n}2
  env $(cfg $n) timeout 40 /tmp/bin/ts infer $M/encoder.onnx --input input_features=$M/input.npy --precision f16 --repeat 20 --profile 3 -o /tmp/wh-$s > $W/whisper_$s.txt 2>&1; echo "rc $?" >> $W/whisper_$s.txt
done
save
for n in base onepass prev base onepass prev; do
  s=$n; [ -e $W/bert_$n.txt ] && s=${n}2
  env $(cfg $n) timeout 40 /tmp/bin/ts infer $E/enc.onnx --input x=$E/features.npy --precision f16 --repeat 20 --profile 3 -o /tmp/enc-$s > $W/bert_$s.txt 2>&1; echo "rc $?" >> $W/bert_$s.txt
done
save
wait $GEN
if [ $(left) -gt 200 ]; then
  timeout 100 /tmp/bin/ts compile models/scale/lm/decoder.onnx -o /tmp/prefill.tspk --kv-cache 128 \
    --shape input_ids=1x128 --shape position_ids=1x128 --shape attention_mask=1x128 \
    > $W/prefill-compile.txt 2>&1; echo "rc $?" >> $W/prefill-compile.txt
  for n in base onepass prev one; do
    [ $(left) -gt 150 ] || break
    env $(cfg $n) timeout 40 /tmp/bin/ts infer /tmp/prefill.tspk --fill-missing 1 --repeat 10 --profile 3 -o /tmp/pp-$n > $W/prefill_$n.txt 2>&1; echo "rc $?" >> $W/prefill_$n.txt
  done
  save
fi
if [ $(left) -gt 140 ]; then
  timeout 60 /tmp/bin/ts check workloads/assistant-scale.ron > $W/check-scale.txt 2>&1; echo "rc $?" >> $W/check-scale.txt
  for n in base one; do
    env $(cfg $n) timeout 30 /tmp/bin/ts infer models/scale/lm/decoder.tspk --fill-missing 1 --repeat 20 --profile 5 -o /tmp/pd-$n > $W/decode_$n.txt 2>&1; echo "rc $?" >> $W/decode_$n.txt
  done
  save
fi
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
for p, o, alts in (('wh', 'last_hidden_state.npy', ('one', 'onepass')), ('enc', 'y.npy', ('onepass', 'prev')),
                   ('pp', 'logits.npy', ('onepass', 'prev', 'one')), ('pd', 'logits.npy', ('one',))):
    for a in alts:
        try:
            x, y = np.load(f'/tmp/{p}-base/{o}'), np.load(f'/tmp/{p}-{a}/{o}')
            same = (x.reshape(-1, x.shape[-1]).argmax(-1) == y.reshape(-1, y.shape[-1]).argmax(-1)).mean()
            print(p, a, 'vs base max diff', float(abs(x - y).max()), 'range', float(x.max() - x.min()), 'argmax agree', float(same))
        except Exception as e:
            print(p, a, 'not compared:', e)
PYEOF
save
if [ $(left) -gt 40 ]; then
  (cd vk-backend && timeout $(( $(left) - 10 )) /tmp/bin/kmat constant_b_on_cooperative_matrices_where_available > $W/kernel_matmul.txt 2>&1; echo "rc $?" >> $W/kernel_matmul.txt)
  save
fi
tail -n 3 $W/kernel_norm.txt $W/kernel_attention.txt $W/kernel_matmul.txt 2>/dev/null
for f in chain_dec chain_pre chain_wh; do for s in new one new2 one2; do echo "== $f $s"; grep -hE "repeat runs|^LayerNormalization " $W/${f}_$s.txt; done; done
for f in whisper bert prefill decode; do for s in base one onepass prev base2 one2 onepass2 prev2; do [ -e $W/${f}_$s.txt ] || continue; echo "== $f $s"; grep -hE "repeat runs|^LayerNormalization |^Attention |^MatMul " $W/${f}_$s.txt; done; done
tail -n 3 $W/torch_whisper.txt; cat $W/compare.txt
echo "elapsed $(( $(date +%s) - T0 )) s"
