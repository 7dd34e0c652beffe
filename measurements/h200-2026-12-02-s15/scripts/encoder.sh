#!/usr/bin/env bash
# H200 session 15: the BERT-base-shaped encoder of workloads/assistant-scale.ron (12 layers, 768
# wide, 128 tokens; scripts/make_scale_models.py, random weights) fully resident:
# `texstream infer enc.onnx --precision f16 --repeat 30` (fp16 activations, and fp32 activations
# over fp16 weights) beside PyTorch fp16 eager and CUDA graph on the same weights
# (scripts/encoder_baseline.py), each against ONNX Runtime CPU fp32; `--profile 5` of both.
# Carries .gl and .devbin/texstream.xz. Outputs: $OUT/e.tgz.
set -u
cd "$(dirname "$0")/../../.."
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
W=/tmp/w; rm -rf $W; mkdir -p /tmp/bin $W
xz -dc .devbin/texstream.xz > /tmp/bin/texstream && chmod +x /tmp/bin/texstream
M=/tmp/enc; rm -rf $M
$PY scripts/make_scale_models.py $M --decoder 125m --reference > $W/gen.txt 2>&1
for act in f16 f32; do
  /tmp/bin/texstream infer $M/enc.onnx --input x=$M/features.npy --precision f16 \
    --activations $act --repeat 30 -o $W/tx_$act > $W/infer_$act.txt 2>&1
  echo "rc $?" >> $W/infer_$act.txt
  /tmp/bin/texstream infer $M/enc.onnx --input x=$M/features.npy --precision f16 \
    --activations $act --profile 5 -o $W/prof_$act > $W/profile_$act.txt 2>&1
done
timeout 200 $PY scripts/encoder_baseline.py $M/enc.onnx $M/features.npy $W/torch_enc.json \
  --ort-output $M/enc_out.npy --texstream-output $W/tx_f16/y.npy > $W/torch_enc.txt 2>&1
echo "rc $?" >> $W/torch_enc.txt
$PY - <<'PY' >> $W/torch_enc.txt
import numpy as np
ref = np.load("/tmp/enc/enc_out.npy").astype(np.float64)
for act in ("f16", "f32"):
    y = np.load(f"/tmp/w/tx_{act}/y.npy").astype(np.float64)
    print(f"texstream activations {act}: max |diff| / range = {np.abs(y - ref).max() / (ref.max() - ref.min()):.3e}")
PY
tar czf $OUT/e.tgz -C $W .
grep -E "median|whole|GPU|rc" $W/infer_*.txt | head -20
tail -40 $W/torch_enc.txt
