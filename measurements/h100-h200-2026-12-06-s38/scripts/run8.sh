#!/usr/bin/env bash
# Session 38, run 8: ResNet-50 on .dev38/final3.xz with every small or wide tensor-core
# convolution forced onto 2, 4, 8 and 16 reduction spans, beside the spans by shape and none:
# per-shape times, to set the rule. Two rounds after a warm-up.
set -u
cd "$(dirname "$0")/../../.."
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
W=/tmp/d; mkdir -p /tmp/bin $W /tmp/tv
xz -dc .dev38/final3.xz > /tmp/bin/final3; chmod +x /tmp/bin/*
save() { tar czf $OUT/d.tgz -C $W .; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $W/gpu.txt 2>&1
timeout 200 $PY scripts/kernel_baseline.py /tmp/tv --models resnet50 --iters 20 > $W/torch_tv.txt 2>&1
inf() { local s=$1; shift; timeout 60 /tmp/bin/final3 infer "$@" --precision f16 --repeat 20 --profile 3 -o /tmp/o-$s > $W/$s.txt 2>&1; echo "rc $?" >> $W/$s.txt; }
R="/tmp/tv/resnet50.onnx --input input=/tmp/tv/resnet50.input.npy"
inf warm $R
for r in 1 2; do inf shape_$r $R; for k in 1 2 4 8 16; do TEXSTREAM_CONV_SPLIT_K=$k inf k${k}_$r $R; done; done; save
for f in $(ls $W | grep -E '_(1|2).txt$' | sort); do
  echo "== $f $(grep -o 'GPU [0-9.]* ms' $W/$f | head -1) $(grep -o 'replayed commands: [0-9]* dispatches' $W/$f) $(grep -hE '^Conv ' $W/$f | tr -s ' ') $(grep -hE '^rc [1-9]' $W/$f)"; done
for f in shape_1 k1_1 k2_1 k4_1 k8_1 k16_1; do echo "== $f"; grep -E '^  Conv' $W/$f.txt | head -15 | tr -s ' '; done
