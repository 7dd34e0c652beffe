#!/usr/bin/env bash
# Session 34, run 1: the tensor-core MatMul with parts of its step switched off (SPIR-V overrides
# of every matmul_const_coop* kernel; experiment build), on the Whisper-tiny and BERT-base encoders.
set -u
cd "$(dirname "$0")/.."
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
W=/tmp/d1; mkdir -p /tmp/bin $W
xz -dc .devbin11/ts.xz > /tmp/bin/ts; chmod +x /tmp/bin/*
tar xJf .devbin11/spv.tar.xz -C /tmp
save() { tar czf $OUT/d.tgz -C $W .; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $W/gpu.txt 2>&1
[ -e /tmp/wenc/encoder.onnx ] || timeout 100 $PY scripts/whisper_encoder_baseline.py /tmp/wenc --iters 3 > $W/torch_whisper.txt 2>&1
E=/tmp/enc; [ -e $E/enc.onnx ] || timeout 60 $PY scripts/make_scale_models.py $E --decoder 125m --reference > $W/gen_enc.txt 2>&1
inf() { local s=$1 v=$2; shift 2
  if [ $v = def ]; then e=X=1; else e=TEXSTREAM_EXP_SPV_DIR=/tmp/spv/$v; fi
  env $e timeout 60 /tmp/bin/ts infer "$@" --precision f16 --profile 3 -o /tmp/o1-$s > $W/$s.txt 2>&1; echo "rc $?" >> $W/$s.txt; }
timeout 60 /tmp/bin/ts infer /tmp/wenc/encoder.onnx --input input_features=/tmp/wenc/input.npy --precision f16 --repeat 50 -o /tmp/warm > /dev/null 2>&1
for r in 1 2; do for v in def base NO_A NO_B NO_LOCATE NO_AB NO_MMA NO_STORE; do
  inf whisper_${v}_$r $v /tmp/wenc/encoder.onnx --input input_features=/tmp/wenc/input.npy --repeat 20
  inf bert_${v}_$r $v $E/enc.onnx --input x=$E/features.npy --repeat 20
done; save; done
save
for f in $(ls $W | grep -E '^(whisper|bert)_' | sort); do
  echo "== $f"; grep -hE "repeat runs|^  MatMul |EXP override" $W/$f | sort | uniq -c | sed 's/^ *//' ; done
