#!/usr/bin/env bash
# H200 session 15: a Whisper-tiny encoder (random weights, HF's WhisperEncoder exported with the
# TorchScript exporter, 30 s of input) resident, fp16 weights: `texstream infer --precision f16
# --repeat 30` with fp16 and with fp32 activations, beside PyTorch fp16 eager and CUDA graph on
# the same module (scripts/whisper_encoder_baseline.py), each against ONNX Runtime CPU fp32.
# Carries .gl and .devbin/texstream_mm.xz (the release binary at 8f4edd4). Outputs: $OUT/w.tgz.
set -u
cd "$(dirname "$0")/../../.."
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
W=/tmp/w; rm -rf $W; mkdir -p $W /tmp/bin
xz -dc .devbin/texstream_mm.xz > /tmp/bin/texstream && chmod +x /tmp/bin/texstream
M=/tmp/wenc; rm -rf $M
timeout 200 $PY scripts/whisper_encoder_baseline.py $M > $W/torch.txt 2>&1; echo "rc $?" >> $W/torch.txt
cp $M/torch.json $W/ 2>/dev/null
for act in f16 f32; do
  timeout 100 /tmp/bin/texstream infer $M/encoder.onnx --input input_features=$M/input.npy \
    --precision f16 --activations $act --repeat 30 -o $W/o_$act > $W/infer_$act.txt 2>&1
  echo "rc $?" >> $W/infer_$act.txt
  timeout 100 /tmp/bin/texstream infer $M/encoder.onnx --input input_features=$M/input.npy \
    --precision f16 --activations $act --profile 5 -o $W/p_$act > $W/profile_$act.txt 2>&1
done
$PY - <<'PY' > $W/summary.txt
import glob, numpy as np
ref = np.load("/tmp/wenc/ort.npy").astype(np.float64)
for act in ("f16", "f32"):
    f = glob.glob(f"/tmp/w/o_{act}/*.npy")
    if f:
        y = np.load(f[0]).astype(np.float64)
        print(f"texstream activations {act}: vs ORT {np.abs(y - ref).max() / (ref.max() - ref.min()):.2e}")
PY
rm -rf $W/o_* $W/p_*
tar czf $OUT/w.tgz -C $W .
grep -E "median|rc" $W/infer_*.txt; cat $W/summary.txt; tail -30 $W/torch.txt
