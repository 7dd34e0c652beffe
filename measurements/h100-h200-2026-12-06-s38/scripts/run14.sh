#!/usr/bin/env bash
# Session 38, run 14: PyTorch's torch.compile (mode "reduce-overhead") against its CUDA-graph
# replay on ResNet-50 and MobileNetV3-Large, fp16 batch 1 (scripts/compile_baseline.py here), to
# know which is the faster PyTorch number the kernel table compares with.
set -u
cd "$(dirname "$0")/../../.."
PY=/opt/torch/.venv/bin/python3
W=/tmp/d14; mkdir -p $W
save() { tar czf $OUT/d.tgz -C $W .; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $W/gpu.txt 2>&1
timeout 240 $PY measurements/h100-h200-2026-12-06-s38/scripts/compile_baseline.py resnet50 mobilenet_v3_large > $W/compile.txt 2>&1; echo "rc $?" >> $W/compile.txt
save; tail -3 $W/compile.txt
