#!/usr/bin/env bash
# Session 38, run 1: norms and attention writing their MatMuls' packed A, and the convolution's
# 96-channel large tile (.dev38/new.xz) against 3157ceb (.dev38/base.xz) on one card: the
# Whisper-tiny encoder and the BERT-base-shaped encoder, two rounds after a warm-up of each
# binary, each change switched off alone, outputs bit for bit against the base and against
# ONNX Runtime; LayerNorm ablations (shader variants); the kernel tests that only a device
# with cooperative matrices runs (packed norm and attention outputs, the new tile).
set -u
cd "$(dirname "$0")/../../.."
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
W=/tmp/d; mkdir -p /tmp/bin $W
for b in base new t_norm t_attention t_conv; do xz -dc .dev38/$b.xz > /tmp/bin/$b; done; chmod +x /tmp/bin/*
save() { tar czf $OUT/d.tgz -C $W .; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $W/gpu.txt 2>&1
( timeout 150 /tmp/bin/t_norm --test-threads 1 > $W/t_norm.txt 2>&1; echo "rc $?" >> $W/t_norm.txt
  timeout 150 /tmp/bin/t_conv conv2d_on_each_cooperative_tile --test-threads 1 > $W/t_conv.txt 2>&1; echo "rc $?" >> $W/t_conv.txt ) &
timeout 100 $PY scripts/whisper_encoder_baseline.py /tmp/wenc --iters 10 > $W/torch_whisper.txt 2>&1
E=/tmp/enc; timeout 60 $PY scripts/make_scale_models.py $E --decoder 125m --reference > $W/gen_enc.txt 2>&1
wait
WH="/tmp/wenc/encoder.onnx --input input_features=/tmp/wenc/input.npy --repeat 20"
BE="$E/enc.onnx --input x=$E/features.npy --repeat 20"
inf() { local s=$1 b=$2; shift 2; timeout 60 /tmp/bin/$b infer "$@" --precision f16 --profile 3 -o /tmp/o-$s > $W/$s.txt 2>&1; echo "rc $?" >> $W/$s.txt; }
for b in base new; do inf warm_w_$b $b $WH; inf warm_b_$b $b $BE; done
for r in 1 2; do
  for b in base new; do inf whisper_${b}_$r $b $WH; inf bert_${b}_$r $b $BE; done
  TEXSTREAM_NORM_PACKED_OUT=0 inf whisper_nonorm_$r new $WH
  TEXSTREAM_ATTENTION_PACKED_OUT=0 inf whisper_noattn_$r new $WH
  TEXSTREAM_COOP_CONV_TILE=large inf whisper_large_$r new $WH
  TEXSTREAM_NORM_PACKED_OUT=0 inf bert_nonorm_$r new $BE
done; save
for v in NOLOAD NOSTORE; do TEXSTREAM_SHADER_DIR=.dev38/sd/ln_$v inf abl_$v new $WH; done
timeout 200 /tmp/bin/t_attention --test-threads 1 > $W/t_attention.txt 2>&1; echo "rc $?" >> $W/t_attention.txt; save
timeout 120 $PY scripts/encoder_baseline.py $E/enc.onnx $E/features.npy $W/torch_bert.json --iters 20 --texstream-output /tmp/o-bert_new_1/y.npy > $W/torch_bert.txt 2>&1
$PY - > $W/compare.txt 2>&1 <<'PY'
import numpy as np
ref = np.load("/tmp/wenc/ort.npy").reshape(-1)
for s in ("base_1", "new_1", "nonorm_1", "noattn_1", "large_1"):
    try:
        a = np.load(f"/tmp/o-whisper_{s}/last_hidden_state.npy").reshape(-1)
        b = np.load("/tmp/o-whisper_base_1/last_hidden_state.npy").reshape(-1)
        print("whisper", s, "vs ORT max diff", float(np.abs(a - ref).max()), "range", float(ref.max() - ref.min()), "vs base", float(np.abs(a - b).max()))
    except Exception as e:
        print(s, e)
for s in ("new_1", "nonorm_1"):
    try:
        a, b = np.load(f"/tmp/o-bert_{s}/y.npy"), np.load("/tmp/o-bert_base_1/y.npy")
        print("bert", s, "vs base", float(np.abs(a - b).max()))
    except Exception as e:
        print(s, e)
PY
save; cat $W/compare.txt; grep -E '"ms_median"|texstream_vs_ort' $W/torch_whisper.txt $W/torch_bert.json
grep -hE "^test result|FAILED|panicked|^rc" $W/t_*.txt
for f in $(ls $W | grep -E '^(whisper|bert|abl)_' | sort); do
  echo "== $f $(grep -o 'GPU [0-9.]* ms' $W/$f | head -1) $(grep -o 'replayed commands: [0-9]* dispatches' $W/$f) $(grep -hE '^(MatMul|Attention|LayerNormalization|Conv|Transpose) ' $W/$f | tr -s ' ' | tr '\n' ';') $(grep -hE '^rc [1-9]' $W/$f)"; done
