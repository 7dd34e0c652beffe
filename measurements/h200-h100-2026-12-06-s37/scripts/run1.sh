#!/usr/bin/env bash
# Session 37, run 1: session 36's run1.sh on one build (.dev37: texstream and the kernel_matmul
# test binary at c132229, stripped, xz). Variants, all from that binary:
#   base    as built (MatMul packed output and head copies off)
#   pout    TEXSTREAM_MATMUL_PACKED_OUT=1 (an MLP's fc1 writes fc2's packed A)
#   copies  pout + TEXSTREAM_ATTENTION_HEAD_COPIES=1 (q/k/v copied into heads by heads_from_rows.comp)
#   apf     TEXSTREAM_SHADER_DIR=.dev37/sd/apf (session 35's attention_prefetch.patch)
# and after round 1 the wide one-pass attention's ablations (.dev37/sd/abl_*, from
# ../../no-device-2026-12-06-s36/patches/attention_ablate.patch; outputs wrong by design).
set -u
cd "$(dirname "$0")/../../.."
T0=$(date +%s); left() { echo $(( ${BUDGET:-400} - ($(date +%s) - T0) )); }
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
W=/tmp/d; mkdir -p /tmp/bin $W
xz -dc .dev37/ts.xz > /tmp/bin/ts; xz -dc .dev37/km.xz > /tmp/bin/km; chmod +x /tmp/bin/*
save() { tar czf $OUT/d.tgz -C $W .; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $W/gpu.txt 2>&1
(cd vk-backend && timeout 90 /tmp/bin/km --test-threads 1 compensated chained constant_b_on_cooperative > $W/kernel_matmul.txt 2>&1; echo "rc $?" >> $W/kernel_matmul.txt)
save
[ -e /tmp/wenc/encoder.onnx ] || timeout 100 $PY scripts/whisper_encoder_baseline.py /tmp/wenc --iters 3 > $W/torch_whisper.txt 2>&1
E=/tmp/enc; [ -e $E/enc.onnx ] || timeout 60 $PY scripts/make_scale_models.py $E --decoder 125m --reference > $W/gen_enc.txt 2>&1
inf() { local s=$1 v=$2; shift 2; local e="X=1"
  case $v in pout) e="TEXSTREAM_MATMUL_PACKED_OUT=1";; copies) e="TEXSTREAM_MATMUL_PACKED_OUT=1 TEXSTREAM_ATTENTION_HEAD_COPIES=1";;
    apf|abl_*) e="TEXSTREAM_SHADER_DIR=$PWD/.dev37/sd/$v";; esac
  env $e timeout 60 /tmp/bin/ts infer "$@" --precision f16 --profile 3 -o /tmp/o-$s > $W/$s.txt 2>&1; echo "rc $?" >> $W/$s.txt; }
WH="/tmp/wenc/encoder.onnx --input input_features=/tmp/wenc/input.npy --repeat 20"
BE="$E/enc.onnx --input x=$E/features.npy --repeat 20"
inf warm base $WH; inf warm2 base $BE
for r in 1 2; do
  for v in base pout copies; do inf whisper_${v}_$r $v $WH; inf bert_${v}_$r $v $BE; done
  inf whisper_apf_$r apf $WH; save
  if [ $r = 1 ]; then for a in NONE NOLOAD NOSCORE NOPV NOEXP; do inf abl_${a}_$r abl_$a $WH; done; save; fi
  [ $(left) -gt 90 ] || break
done
$PY - > $W/compare.txt 2>&1 <<'PY'
import glob, os, numpy as np
for m, x, y in [("whisper", "base", "pout"), ("bert", "base", "pout"), ("whisper", "base", "apf"), ("whisper", "base", "copies"), ("bert", "base", "copies")]:
    for f in sorted(glob.glob(f"/tmp/o-{m}_{x}_1/*.npy")):
        g = f.replace(f"_{x}_1", f"_{y}_1")
        if os.path.exists(g):
            a, b = np.load(f), np.load(g)
            print(m, x, y, os.path.basename(f), "max diff", float(np.abs(a - b).max()), "range", float(a.max() - a.min()))
PY
save
grep -E "test result|FAILED|panicked|^rc" $W/kernel_matmul.txt
cat $W/compare.txt; grep -iE "median|cuda graph|ms" $W/torch_whisper.txt | head -5
for f in $(ls $W | grep -E '^(whisper|bert|abl)_' | sort); do
  echo "== $f $(grep -o 'GPU [0-9.]* ms' $W/$f | head -1) $(grep -o 'median [0-9.]* ms' $W/$f | head -1)"; grep -hE "^MatMul |^Attention |^rc [1-9]" $W/$f | head -3; done
