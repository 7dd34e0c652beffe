#!/usr/bin/env bash
# Session 33, run 4 (same binaries as run 3): vk-backend's kernel_conv without the validation
# layer (the device has none installed), and the convolution tile by shape (`shape`: the large
# tile where its workgroups fill the device, else as before) against `wide`, alternating, on the
# OCR detector, the Whisper-tiny encoder and ResNet-50 as in run 3.
set -u
cd "$(dirname "$0")/../../.."
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
W=/tmp/d6; mkdir -p /tmp/bin $W /tmp/tv
xz -dc .devbin5/ts.xz > /tmp/bin/ts; xz -dc .devbin5/kconv.xz > /tmp/bin/kconv; chmod +x /tmp/bin/*
xz -dc .devbin5/det.onnx.xz > /tmp/det.onnx
save() { tar czf $OUT/d.tgz -C $W .; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $W/gpu.txt 2>&1
[ -e /tmp/wenc/encoder.onnx ] || (timeout 100 $PY scripts/whisper_encoder_baseline.py /tmp/wenc --iters 3 > $W/torch_whisper.txt 2>&1) &
TW=$!
[ -e /tmp/tv/resnet50.onnx ] || (timeout 150 $PY scripts/kernel_baseline.py /tmp/tv --models resnet50 --iters 50 > $W/torch_resnet.txt 2>&1) &
TR=$!
(cd vk-backend && timeout 150 /tmp/bin/kconv --test-threads=1 > $W/kernel_conv.txt 2>&1; echo "rc $?" >> $W/kernel_conv.txt)
$PY -c "import numpy as np; np.save('/tmp/det.input.npy', np.random.default_rng(0).uniform(-1, 1, [1, 3, 384, 768]).astype(np.float32))"
save
run() {
  local m=$1 f=$2; shift 2
  for t in wide shape wide shape; do
    s=$t; [ -e $W/${m}_$t.txt ] && s=${t}2
    TEXSTREAM_COOP_CONV_TILE=$t timeout 60 /tmp/bin/ts infer $f "$@" --precision f16 --repeat 20 --profile 3 -o /tmp/o4-$m-$s > $W/${m}_$s.txt 2>&1; echo "rc $?" >> $W/${m}_$s.txt
  done
}
timeout 60 /tmp/bin/ts infer /tmp/det.onnx --input x=/tmp/det.input.npy --precision f16 --repeat 30 -o /tmp/warm > /dev/null 2>&1
run det /tmp/det.onnx --input x=/tmp/det.input.npy
wait $TW; run whisper /tmp/wenc/encoder.onnx --input input_features=/tmp/wenc/input.npy
wait $TR; run resnet50 /tmp/tv/resnet50.onnx --input input=/tmp/tv/resnet50.input.npy
save
tail -n 4 $W/kernel_conv.txt
for m in det whisper resnet50; do for s in wide shape wide2 shape2; do echo "== $m $s"; grep -hE "repeat runs|^Conv " $W/${m}_$s.txt; done; done
