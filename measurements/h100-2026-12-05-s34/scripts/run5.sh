#!/usr/bin/env bash
# Session 34, run 5: [K, N] weights packed in column strips (new, .devbin12) against row-major
# (old, .devbin11 = 6a... HEAD d155450 with an experiment hook unused here), alternating, on the
# Whisper-tiny and BERT-base encoders, the OCR classifier and recognizer, the 1.34 B prefill and
# decode step. `texstream infer MODEL --precision f16 --repeat 20 --profile 3`, resident.
set -u
cd "$(dirname "$0")/.."
T0=$(date +%s); left() { echo $(( 570 - ($(date +%s) - T0) )); }
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
W=/tmp/d5; mkdir -p /tmp/bin $W
xz -dc .devbin11/ts.xz > /tmp/bin/old; xz -dc .devbin12/ts.xz > /tmp/bin/new; chmod +x /tmp/bin/*
for m in cls rec; do xz -dc .devbin13/$m.onnx.xz > /tmp/$m.onnx; done
save() { tar czf $OUT/d.tgz -C $W .; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $W/gpu.txt 2>&1
([ -e models/scale/lm/decoder.onnx ] || timeout 170 $PY scripts/make_scale_models.py models/scale --decoder 1.3b > $W/gen.txt 2>&1; echo "rc $?" >> $W/gen.txt) &
$PY - <<'PY'
import numpy as np
rng = np.random.default_rng(0)
for name, shape in [("cls", [1, 3, 48, 192]), ("rec", [1, 3, 48, 768])]:
    np.save(f"/tmp/{name}.input.npy", rng.uniform(-1, 1, shape).astype(np.float32))
PY
[ -e /tmp/wenc/encoder.onnx ] || timeout 100 $PY scripts/whisper_encoder_baseline.py /tmp/wenc --iters 3 > $W/torch_whisper.txt 2>&1
E=/tmp/enc; [ -e $E/enc.onnx ] || timeout 60 $PY scripts/make_scale_models.py $E --decoder 125m --reference > $W/gen_enc.txt 2>&1
inf() { local s=$1 b=$2; shift 2
  timeout 60 /tmp/bin/$b infer "$@" --precision f16 --profile 3 -o /tmp/o5-$s > $W/$s.txt 2>&1; echo "rc $?" >> $W/$s.txt; }
timeout 60 /tmp/bin/new infer /tmp/wenc/encoder.onnx --input input_features=/tmp/wenc/input.npy --precision f16 --repeat 50 -o /tmp/warm > /dev/null 2>&1
for r in 1 2; do for b in old new; do
  inf whisper_${b}_$r $b /tmp/wenc/encoder.onnx --input input_features=/tmp/wenc/input.npy --repeat 20
  inf bert_${b}_$r $b $E/enc.onnx --input x=$E/features.npy --repeat 20
  inf rec_${b}_$r $b /tmp/rec.onnx --input x=/tmp/rec.input.npy --repeat 20
  inf cls_${b}_$r $b /tmp/cls.onnx --input x=/tmp/cls.input.npy --repeat 20
done; save; done
wait
for b in old new; do
  timeout 100 /tmp/bin/$b compile models/scale/lm/decoder.onnx -o /tmp/prefill_$b.tspk --kv-cache 128 \
    --shape input_ids=1x128 --shape position_ids=1x128 --shape attention_mask=1x128 > $W/prefill-compile_$b.txt 2>&1
  rm -f models/scale/lm/decoder.tspk
  timeout 100 /tmp/bin/$b check workloads/assistant-scale.ron > $W/check-scale_$b.txt 2>&1
  cp models/scale/lm/decoder.tspk /tmp/decode_$b.tspk
done
for r in 1 2; do for b in old new; do
  [ $(left) -gt 60 ] || break
  inf prefill_${b}_$r $b /tmp/prefill_$b.tspk --fill-missing 1 --repeat 10
  inf decode_${b}_$r $b /tmp/decode_$b.tspk --fill-missing 1 --repeat 20
done; save; done
$PY - > $W/compare.txt 2>&1 <<'PY'
import glob, os, numpy as np
for m in ["whisper", "bert", "rec", "cls", "prefill", "decode"]:
    for f in sorted(glob.glob(f"/tmp/o5-{m}_old_1/*.npy")):
        g = f.replace("_old_1", "_new_1")
        if os.path.exists(g):
            a, b = np.load(f), np.load(g)
            print(m, os.path.basename(f), "max |old-new|", float(np.abs(a - b).max()), "range", float(a.max() - a.min()))
PY
save
cat $W/compare.txt
for f in $(ls $W | grep -E '^(whisper|bert|rec|cls|prefill|decode)_' | sort); do
  echo "== $f $(grep -o 'GPU [0-9.]* ms' $W/$f | head -1) $(grep -o 'median [0-9.]* ms' $W/$f | head -1)"; grep -hE "^MatMul |^Gemm |^LSTM " $W/$f | head -3; done
