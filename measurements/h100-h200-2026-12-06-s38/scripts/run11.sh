#!/usr/bin/env bash
# Session 38, run 11: DenseNet-121 on the session's end (.dev38/final4.xz) with the tensor-core
# convolutions' reduction spans by shape against none (TEXSTREAM_CONV_SPLIT_K=1: the small tile
# where its shape picks it, as before the session): its 3x3 convolutions to 32 channels took the
# wide tile over two spans in run 10. Two rounds after a warm-up, per-shape times.
set -u
cd "$(dirname "$0")/../../.."
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
W=/tmp/d11; mkdir -p /tmp/bin $W /tmp/tv11
xz -dc .dev38/final4.xz > /tmp/bin/ts; chmod +x /tmp/bin/ts
save() { tar czf $OUT/d.tgz -C $W .; }
timeout 240 $PY scripts/kernel_baseline.py /tmp/tv11 --models densenet121 --iters 20 > $W/torch_tv.txt 2>&1
inf() { local s=$1; shift; timeout 60 /tmp/bin/ts infer "$@" --precision f16 --repeat 20 --profile 3 -o /tmp/o11-$s > $W/$s.txt 2>&1; echo "rc $?" >> $W/$s.txt; }
D="/tmp/tv11/densenet121.onnx --input input=/tmp/tv11/densenet121.input.npy"
inf warm $D
for r in 1 2; do inf shape_$r $D; TEXSTREAM_CONV_SPLIT_K=1 inf off_$r $D; done; save
for f in shape_1 shape_2 off_1 off_2; do echo "== $f $(grep -o 'GPU [0-9.]* ms' $W/$f.txt | head -1) $(grep -o 'replayed commands: [0-9]* dispatches' $W/$f.txt)"; grep -E '^  Conv' $W/$f.txt | head -5 | tr -s ' '; done
