#!/usr/bin/env bash
# Session 35, run 3b (what device time was left after run 3's starts failed): the MatMul kernel
# tests of .devbin15 (the build without weight_finish in the tensor-core MatMuls, and a
# compensated B on the portable kernels) against their CPU reference on this card's tensor
# cores; then, if time is left, the Whisper-tiny encoder with the one-pass wide attention's next
# key/value block in flight (patches/attention_prefetch.patch) against the build.
set -u
cd "$(dirname "$0")/../../.."
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
W=/tmp/d3b; mkdir -p /tmp/bin $W
save() { tar czf $OUT/d.tgz -C $W .; }
xz -dc .devbin15/kernel_matmul.xz > /tmp/bin/km; xz -dc .devbin15/ts.xz > /tmp/bin/ts; chmod +x /tmp/bin/*
nvidia-smi --query-gpu=name,driver_version --format=csv > $W/gpu.txt 2>&1
(timeout 60 $PY scripts/whisper_encoder_baseline.py /tmp/wenc --iters 3 > $W/torch_whisper.txt 2>&1) &
(cd vk-backend && timeout 40 /tmp/bin/km --test-threads 1 > $W/kernel_matmul.txt 2>&1; echo "rc $?" >> $W/kernel_matmul.txt)
save
grep -E "test result|FAILED|panicked|^rc" $W/kernel_matmul.txt
wait
WH="/tmp/wenc/encoder.onnx --input input_features=/tmp/wenc/input.npy --repeat 20"
inf() { local s=$1 e=$2; shift 2
  env $e timeout 20 /tmp/bin/ts infer "$@" --precision f16 --profile 3 -o /tmp/o3b-$s > $W/$s.txt 2>&1; echo "rc $?" >> $W/$s.txt; }
inf warm X=1 $WH
for r in 1 2; do inf whisper_new_$r X=1 $WH; inf whisper_apf_$r TEXSTREAM_SHADER_DIR=$PWD/.devbin15/sd/apf $WH; save; done
$PY -c "
import numpy as np; a=np.load('/tmp/o3b-whisper_new_1/last_hidden_state.npy'); b=np.load('/tmp/o3b-whisper_apf_1/last_hidden_state.npy')
print('whisper new apf max diff', float(np.abs(a-b).max()))" > $W/compare.txt 2>&1
save
cat $W/compare.txt
for f in $(ls $W | grep -E '^whisper_' | sort); do
  echo "== $f $(grep -o 'GPU [0-9.]* ms' $W/$f | head -1)"; grep -hE "^MatMul |^Attention " $W/$f | head -2; done
