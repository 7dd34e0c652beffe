#!/usr/bin/env bash
# Session 34, run 4: B read in GOB-compact tiles (COMPACT: B-row k/4 at atlas row (k/4) % 256 of a page per 512
# columns; wrong values, the same distinct data) against the build (def, base); Whisper, BERT, prefill.
set -u
cd "$(dirname "$0")/.."
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
W=/tmp/d4; mkdir -p /tmp/bin $W
xz -dc .devbin11/ts.xz > /tmp/bin/ts; chmod +x /tmp/bin/*
rm -rf /tmp/spv; tar xJf .devbin11/spv.tar.xz -C /tmp
save() { tar czf $OUT/d.tgz -C $W .; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $W/gpu.txt 2>&1
([ -e /tmp/prefill.tspk ] || timeout 170 $PY scripts/make_scale_models.py models/scale --decoder 1.3b > $W/gen.txt 2>&1; echo "rc $?" >> $W/gen.txt) &
[ -e /tmp/wenc/encoder.onnx ] || timeout 100 $PY scripts/whisper_encoder_baseline.py /tmp/wenc --iters 3 > $W/torch_whisper.txt 2>&1
E=/tmp/enc; [ -e $E/enc.onnx ] || timeout 60 $PY scripts/make_scale_models.py $E --decoder 125m --reference > $W/gen_enc.txt 2>&1
inf() { local s=$1 v=$2; shift 2
  if [ $v = def ]; then e=X=1; else e=TEXSTREAM_EXP_SPV_DIR=/tmp/spv/$v; fi
  env $e timeout 60 /tmp/bin/ts infer "$@" --precision f16 --profile 3 -o /tmp/o4-$s > $W/$s.txt 2>&1; echo "rc $?" >> $W/$s.txt; }
timeout 60 /tmp/bin/ts infer /tmp/wenc/encoder.onnx --input input_features=/tmp/wenc/input.npy --precision f16 --repeat 50 -o /tmp/warm > /dev/null 2>&1
for r in 1 2; do for v in def base COMPACT; do
  inf whisper_${v}_$r $v /tmp/wenc/encoder.onnx --input input_features=/tmp/wenc/input.npy --repeat 20
  inf bert_${v}_$r $v $E/enc.onnx --input x=$E/features.npy --repeat 20
done; save; done
wait
[ -e /tmp/prefill.tspk ] || timeout 100 /tmp/bin/ts compile models/scale/lm/decoder.onnx -o /tmp/prefill.tspk --kv-cache 128 \
  --shape input_ids=1x128 --shape position_ids=1x128 --shape attention_mask=1x128 > $W/prefill-compile.txt 2>&1
for r in 1 2; do for v in def base COMPACT; do
  inf prefill_${v}_$r $v /tmp/prefill.tspk --fill-missing 1 --repeat 10
done; save; done
$PY - > $W/compare.txt 2>&1 <<'PY'
import glob, os, numpy as np
for m in ["whisper", "bert", "prefill"]:
    ref = sorted(glob.glob(f"/tmp/o4-{m}_def_1/*.npy"))
    for d in sorted(glob.glob(f"/tmp/o4-{m}_*")):
        for f in ref:
            g = os.path.join(d, os.path.basename(f))
            if os.path.exists(g):
                a, b = np.load(f), np.load(g)
                print(m, os.path.basename(d), os.path.basename(f), float(np.abs(a - b).max()), float(a.max() - a.min()))
PY
save
cat $W/compare.txt
for f in $(ls $W | grep -E '^(whisper|bert|prefill)_' | sort); do
  echo "== $f $(grep -o 'GPU [0-9.]* ms' $W/$f | head -1)"; grep -hE "^  MatMul |^MatMul " $W/$f | head -6; done
