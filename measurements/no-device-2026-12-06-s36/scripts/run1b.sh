#!/usr/bin/env bash
# Session 36, run 1b: run 1 cut to what about 200 s of device time holds (one round; the
# ablations as built and without key/value loads only). Run 1: the Whisper and BERT parts of session 35's run 3 (see
# ../../h200-h100-2026-12-05-s35/scripts/run3.sh: with .devbin15, the build at c6dd9fc, the
# attention with its next block's loads in flight, from TEXSTREAM_SHADER_DIR), and then what
# bounds the one-pass wide attention on the Whisper-tiny encoder: patches/attention_ablate.patch, compiled with one define each
# (.devbin16/sd/abl_*: ABL_NONE as built, ABL_NOLOAD no key/value loads, ABL_NOSCORE no score
# products, ABL_NOPV no P V products, ABL_NOEXP no exp), one round. The ablations'
# outputs are wrong by design; only their Attention times mean anything. And the attention
# with its queries, keys and values copied into heads first (TEXSTREAM_ATTENTION_HEAD_COPIES=1,
# with .devbin17's heads_from_rows.comp: a texel four heads, a quarter of the attention's
# loads) instead of read from the projections' rows, on the Whisper and BERT encoders.
# With .devbin17 (this session: an MLP's first projection writes its output as the second's
# packed A, no copy) the MatMul kernel tests of the tensor-core kernels (the compensated B and
# the chained projections among them) and
# Whisper and BERT against .devbin15 (pout, with TEXSTREAM_MATMUL_PACKED_OUT=1).
set -u
cd "$(dirname "$0")/../../.."
T0=$(date +%s); left() { echo $(( 170 - ($(date +%s) - T0) )); }
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
W=/tmp/d3; mkdir -p /tmp/bin $W
xz -dc .devbin15/ts.xz > /tmp/bin/new; xz -dc .devbin17/kernel_matmul.xz > /tmp/bin/km; xz -dc .devbin17/ts.xz > /tmp/bin/pout; chmod +x /tmp/bin/*
save() { tar czf $OUT/d.tgz -C $W .; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $W/gpu.txt 2>&1
(cd vk-backend && timeout 90 /tmp/bin/km --test-threads 1 compensated chained constant_b_on_cooperative > $W/kernel_matmul.txt 2>&1; echo "rc $?" >> $W/kernel_matmul.txt)
[ -e /tmp/wenc/encoder.onnx ] || timeout 100 $PY scripts/whisper_encoder_baseline.py /tmp/wenc --iters 3 > $W/torch_whisper.txt 2>&1
E=/tmp/enc; [ -e $E/enc.onnx ] || timeout 60 $PY scripts/make_scale_models.py $E --decoder 125m --reference > $W/gen_enc.txt 2>&1
inf() { local s=$1 b=$2 e=X=1; shift 2
  case $b in new-*) e=TEXSTREAM_SHADER_DIR=$PWD/.devbin15/sd/${b#new-}; b=new;; esac
  env $e timeout 60 /tmp/bin/$b infer "$@" --precision f16 --profile 3 -o /tmp/o3-$s > $W/$s.txt 2>&1; echo "rc $?" >> $W/$s.txt; }
WH="/tmp/wenc/encoder.onnx --input input_features=/tmp/wenc/input.npy --repeat 20"
BE="$E/enc.onnx --input x=$E/features.npy --repeat 20"
inf warm new $WH; inf warm2 new $BE
for r in 1; do for b in new pout; do
  TEXSTREAM_MATMUL_PACKED_OUT=1 inf whisper_${b}_$r $b $WH; TEXSTREAM_MATMUL_PACKED_OUT=1 inf bert_${b}_$r $b $BE; done
  TEXSTREAM_ATTENTION_HEAD_COPIES=1 inf whisper_copies_$r pout $WH
  TEXSTREAM_ATTENTION_HEAD_COPIES=1 inf bert_copies_$r pout $BE; save
  [ $r = 1 ] && for a in base NOLOAD; do
    env TEXSTREAM_SHADER_DIR=$PWD/.devbin16/sd/abl_$a timeout 60 /tmp/bin/new infer $WH --precision f16 --profile 3 -o /tmp/o3-abl > $W/abl_${a}_$r.txt 2>&1
  done; save
  [ $(left) -gt 80 ] || break; done
$PY - > $W/compare.txt 2>&1 <<'PY'
import glob, os, numpy as np
for m, x, y in [("whisper", "new", "pout"), ("bert", "new", "pout"), ("whisper", "new", "copies"), ("bert", "new", "copies")]:
    for f in sorted(glob.glob(f"/tmp/o3-{m}_{x}_1/*.npy")):
        g = f.replace(f"_{x}_1", f"_{y}_1")
        if os.path.exists(g):
            a, b = np.load(f), np.load(g)
            print(m, x, y, os.path.basename(f), "max diff", float(np.abs(a - b).max()), "range", float(a.max() - a.min()))
PY
save
grep -E "test result|FAILED|panicked|^rc" $W/kernel_matmul.txt
cat $W/compare.txt
for f in $(ls $W | grep -E '^(whisper|bert|prefill|decode|resnet|abl)_' | sort); do
  echo "== $f $(grep -o 'GPU [0-9.]* ms' $W/$f | head -1) $(grep -o 'median [0-9.]* ms' $W/$f | head -1)"; grep -hE "^MatMul |^Conv |^Attention " $W/$f | head -2; done
