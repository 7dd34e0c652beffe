#!/usr/bin/env bash
# Session 38, run 15: a BatchNorm no convolution makes (DenseNet-121's pre-activation BN) as a
# depthwise 1x1 convolution with its ReLU in the epilogue (.dev38/final6.xz) instead of a Mul, an
# Add and a ReLU: DenseNet-121 and ResNet-50 (which has none), outputs against ONNX Runtime.
set -u
cd "$(dirname "$0")/../../.."
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
W=/tmp/d15; mkdir -p /tmp/bin $W /tmp/tv15
xz -dc .dev38/final6.xz > /tmp/bin/ts; chmod +x /tmp/bin/ts
save() { tar czf $OUT/d.tgz -C $W .; }
timeout 150 $PY scripts/kernel_baseline.py /tmp/tv15 --models densenet121 --iters 10 > $W/torch_tv.txt 2>&1
inf() { local s=$1; shift; timeout 60 /tmp/bin/ts infer "$@" --precision f16 --repeat 20 --profile 3 -o /tmp/o15-$s > $W/$s.txt 2>&1; echo "rc $?" >> $W/$s.txt; }
D="/tmp/tv15/densenet121.onnx --input input=/tmp/tv15/densenet121.input.npy"
inf warm $D; inf densenet_1 $D; inf densenet_2 $D; save
$PY - > $W/compare.txt 2>&1 <<'PY'
import numpy as np, os, onnxruntime as ort
x = np.load("/tmp/tv15/densenet121.input.npy")
ref = ort.InferenceSession("/tmp/tv15/densenet121.onnx", providers=["CPUExecutionProvider"]).run(None, {"input": x})[0]
d = "/tmp/o15-densenet_1"; a = np.load(os.path.join(d, sorted(os.listdir(d))[0]))
print("densenet121 vs ORT max diff", float(np.abs(a - ref).max()), "range", float(ref.max() - ref.min()))
PY
save; cat $W/compare.txt; grep -h cuda_graph $W/torch_tv.txt | tail -1
for f in densenet_1 densenet_2; do echo "== $f $(grep -o 'GPU [0-9.]* ms' $W/$f.txt | head -1) $(grep -o 'replayed commands: [0-9]* dispatches' $W/$f.txt) $(grep -hE '^(Conv|Binary|Unary|Concat) ' $W/$f.txt | tr -s ' ' | tr '\n' ';')"; done
