#!/usr/bin/env bash
# Session 34, run 7 (what device time was left after run 6 could not start): run 6's binaries
# (old; C: weight_finish at the store, [K, N] in column strips; D: the same, row-major) on the
# Whisper-tiny and BERT-base encoders only, alternating, one warm-up run of each binary first.
set -u
cd "$(dirname "$0")/.."
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
W=/tmp/d7; mkdir -p /tmp/bin $W
xz -dc .devbin11/ts.xz > /tmp/bin/old; xz -dc .devbin12/tsC.xz > /tmp/bin/C; xz -dc .devbin12/tsD.xz > /tmp/bin/D; chmod +x /tmp/bin/*
save() { tar czf $OUT/d.tgz -C $W .; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $W/gpu.txt 2>&1
[ -e /tmp/wenc/encoder.onnx ] || timeout 100 $PY scripts/whisper_encoder_baseline.py /tmp/wenc --iters 3 > $W/torch_whisper.txt 2>&1
E=/tmp/enc; [ -e $E/enc.onnx ] || timeout 60 $PY scripts/make_scale_models.py $E --decoder 125m --reference > $W/gen_enc.txt 2>&1
inf() { local s=$1 b=$2; shift 2
  timeout 60 /tmp/bin/$b infer "$@" --precision f16 --profile 3 -o /tmp/o7-$s > $W/$s.txt 2>&1; echo "rc $?" >> $W/$s.txt; }
for b in old D; do timeout 60 /tmp/bin/$b infer /tmp/wenc/encoder.onnx --input input_features=/tmp/wenc/input.npy --precision f16 --repeat 30 -o /tmp/warm > /dev/null 2>&1; done
for r in 1; do for b in old D; do
  inf whisper_${b}_$r $b /tmp/wenc/encoder.onnx --input input_features=/tmp/wenc/input.npy --repeat 20
  inf bert_${b}_$r $b $E/enc.onnx --input x=$E/features.npy --repeat 20
done; done
$PY - > $W/compare.txt 2>&1 <<'PY'
import glob, os, numpy as np
for m in ["whisper", "bert"]:
    for f in sorted(glob.glob(f"/tmp/o7-{m}_old_1/*.npy")):
        for v in ["C", "D"]:
            g = f.replace("_old_1", f"_{v}_1")
            if os.path.exists(g):
                a, b = np.load(f), np.load(g)
                print(m, v, os.path.basename(f), "max |old-v|", float(np.abs(a - b).max()), "range", float(a.max() - a.min()))
PY
save
cat $W/compare.txt
for f in $(ls $W | grep -E '^(whisper|bert)_' | sort); do
  echo "== $f $(grep -o 'GPU [0-9.]* ms' $W/$f | head -1)"; grep -hE "^MatMul |^  MatMul " $W/$f | head -4; done
