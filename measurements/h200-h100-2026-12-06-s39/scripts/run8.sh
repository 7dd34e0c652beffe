#!/usr/bin/env bash
# Session 39, run 8: the PyTorch baselines after their CUDA-graph capture and compile timing moved
# into scripts/torch_compiled.py (captured, add_compiled): the Whisper-tiny encoder's and the OCR
# classifier's, to show they still run.
set -u
cd "$(dirname "$0")/../../.."
PY=/opt/torch/.venv/bin/python3
W=/tmp/s39r8; mkdir -p $W /tmp/s39o2t
$PY -m pip install --no-deps --no-index --target /tmp/s39o2t .dev39/wheels/onnx2torch-*.whl > /dev/null 2>&1
xz -dc .dev39/cls.onnx.xz > /tmp/s39cls.onnx
timeout 100 $PY scripts/whisper_encoder_baseline.py /tmp/s39wenc8 --iters 10 --compile > $W/torch_whisper.txt 2>&1; echo "rc $?" >> $W/torch_whisper.txt
PYTHONPATH=/tmp/s39o2t timeout 80 $PY scripts/onnx_torch_baseline.py /tmp/s39cls.onnx $W/torch_cls.json --shape 1,3,48,192 --iters 10 --compile > $W/torch_cls.txt 2>&1; echo "rc $?" >> $W/torch_cls.txt
tar czf $OUT/d.tgz -C $W .
grep -hE '"ms_median"|compile_s|vs_ort|gpu|^rc' $W/torch_whisper.txt $W/torch_cls.txt
