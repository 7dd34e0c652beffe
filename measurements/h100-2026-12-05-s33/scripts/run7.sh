#!/usr/bin/env bash
# Session 33, run 7 (.devbin7/ as run 6): the tensor-core MatMul's step and A packing on the
# small-K encoders (TEXSTREAM_COOP_STEP_K=64, TEXSTREAM_MATMUL_PACKED_A=0) against the defaults
# (128 k a step, A packed), alternating, on the Whisper-tiny and BERT-base-shaped encoders; and
# the three OCR models with the defaults (det 384x768, cls 48x192, rec 48x768), as in
# scripts/bench_models.py's shapes.
set -u
cd "$(dirname "$0")/../../.."
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
W=/tmp/d9; mkdir -p /tmp/bin $W
xz -dc .devbin7/ts.xz > /tmp/bin/ts; chmod +x /tmp/bin/*
for m in det cls rec; do xz -dc .devbin8/$m.onnx.xz > /tmp/$m.onnx; done
save() { tar czf $OUT/d.tgz -C $W .; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $W/gpu.txt 2>&1
$PY - <<'PY'
import numpy as np
rng = np.random.default_rng(0)
for name, shape in [("det", [1, 3, 384, 768]), ("cls", [1, 3, 48, 192]), ("rec", [1, 3, 48, 768])]:
    np.save(f"/tmp/{name}.input.npy", rng.uniform(-1, 1, shape).astype(np.float32))
PY
[ -e /tmp/wenc/encoder.onnx ] || timeout 100 $PY scripts/whisper_encoder_baseline.py /tmp/wenc --iters 3 > $W/torch_whisper.txt 2>&1
E=/tmp/enc; [ -e $E/enc.onnx ] || timeout 60 $PY scripts/make_scale_models.py $E --decoder 125m --reference > $W/gen_enc.txt 2>&1
inf() { local s=$1 e=$2; shift 2
  env $e timeout 60 /tmp/bin/ts infer "$@" --precision f16 --profile 3 -o /tmp/o9-$s > $W/$s.txt 2>&1; echo "rc $?" >> $W/$s.txt; }
cfg() { case $1 in def*) echo X=1;; k64*) echo TEXSTREAM_COOP_STEP_K=64;; rowsa*) echo TEXSTREAM_MATMUL_PACKED_A=0;; esac; }
timeout 60 /tmp/bin/ts infer /tmp/wenc/encoder.onnx --input input_features=/tmp/wenc/input.npy --precision f16 --repeat 50 -o /tmp/warm > /dev/null 2>&1
for c in def k64 rowsa def2 k642 rowsa2; do
  inf whisper_$c "$(cfg $c)" /tmp/wenc/encoder.onnx --input input_features=/tmp/wenc/input.npy --repeat 20
  inf bert_$c "$(cfg $c)" $E/enc.onnx --input x=$E/features.npy --repeat 20
done
for m in det cls rec; do inf $m X=1 /tmp/$m.onnx --input x=/tmp/$m.input.npy --repeat 30; done
save
for f in whisper_def whisper_k64 whisper_rowsa whisper_def2 whisper_k642 whisper_rowsa2 bert_def bert_k64 bert_rowsa bert_def2 bert_k642 bert_rowsa2 det cls rec; do
  echo "== $f"; grep -hE "repeat runs|^MatMul |^Conv |^LSTM " $W/$f.txt; done
