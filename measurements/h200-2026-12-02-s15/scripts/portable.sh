#!/usr/bin/env bash
# H200 session 15: the tensor-core MatMul against the portable kernels (TEXSTREAM_NO_COOPMAT=1)
# on the Whisper-tiny encoder of scripts/whisper.sh and the BERT-base-shaped encoder of
# scripts/encoder.sh, fp16, `texstream infer --repeat 30` and `--profile 5`, same binary.
# Carries .gl and .devbin/texstream_mm.xz (8f4edd4). Outputs: $OUT/p.tgz.
set -u
cd "$(dirname "$0")/../../.."
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
W=/tmp/w; rm -rf $W; mkdir -p $W /tmp/bin
xz -dc .devbin/texstream_mm.xz > /tmp/bin/texstream && chmod +x /tmp/bin/texstream
timeout 100 $PY scripts/whisper_encoder_baseline.py /tmp/wenc --iters 5 > $W/whisper_export.txt 2>&1
timeout 60 $PY scripts/make_scale_models.py /tmp/enc --decoder 125m > $W/gen.txt 2>&1
for mode in coop portable; do
  case $mode in portable) e=TEXSTREAM_NO_COOPMAT=1 ;; *) e=X=1 ;; esac
  env $e timeout 60 /tmp/bin/texstream infer /tmp/wenc/encoder.onnx \
    --input input_features=/tmp/wenc/input.npy --precision f16 --repeat 30 -o $W/o > $W/whisper_$mode.txt 2>&1
  env $e timeout 60 /tmp/bin/texstream infer /tmp/wenc/encoder.onnx \
    --input input_features=/tmp/wenc/input.npy --precision f16 --profile 5 -o $W/o > $W/whisper_profile_$mode.txt 2>&1
  env $e timeout 60 /tmp/bin/texstream infer /tmp/enc/enc.onnx \
    --input x=/tmp/enc/features.npy --precision f16 --repeat 30 -o $W/o > $W/bert_$mode.txt 2>&1
done
rm -rf $W/o
tar czf $OUT/p.tgz -C $W .
grep -H "median" $W/whisper_coop.txt $W/whisper_portable.txt $W/bert_*.txt
grep -H -A3 "^op " $W/whisper_profile_*.txt
