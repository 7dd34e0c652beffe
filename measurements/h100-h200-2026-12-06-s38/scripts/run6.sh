#!/usr/bin/env bash
# Session 38, run 6: the kernel table's rows on the session's build (.dev38/final2.xz), resident
# fp16 batch 1: ResNet-50 and MobileNetV3-Large (scripts/kernel_baseline.py, with PyTorch fp16
# eager and CUDA graph on the same weights), the PP-OCRv6 detector at 384x768 and the
# classifier at 48x192 (the recognizer did not fit the call's 64 MiB), the Whisper-tiny encoder and the
# BERT-base-shaped encoder (with their PyTorch baselines), two rounds after a warm-up.
set -u
cd "$(dirname "$0")/../../.."
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
W=/tmp/d; mkdir -p /tmp/bin $W /tmp/tv
xz -dc .dev38/final2.xz > /tmp/bin/ts; chmod +x /tmp/bin/ts
for m in det cls; do xz -dc .dev38/$m.onnx.xz > /tmp/$m.onnx; done
save() { tar czf $OUT/d.tgz -C $W .; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $W/gpu.txt 2>&1
timeout 200 $PY scripts/kernel_baseline.py /tmp/tv --models resnet50,mobilenet_v3_large --iters 50 > $W/torch_tv.txt 2>&1; cp /tmp/tv/torch.json $W/torch_tv.json 2>/dev/null
timeout 100 $PY scripts/whisper_encoder_baseline.py /tmp/wenc --iters 10 > $W/torch_whisper.txt 2>&1
E=/tmp/enc; timeout 60 $PY scripts/make_scale_models.py $E --decoder 125m --reference > $W/gen_enc.txt 2>&1
$PY - <<'PY'
import numpy as np
r = np.random.default_rng(0)
for m, s in (("det", [1, 3, 384, 768]), ("rec", [1, 3, 48, 320]), ("cls", [1, 3, 48, 192])):
    np.save(f"/tmp/{m}.input.npy", r.uniform(-1, 1, s).astype(np.float32))
PY
save
inf() { local s=$1; shift; timeout 60 /tmp/bin/ts infer "$@" --precision f16 --repeat 20 --profile 3 -o /tmp/o-$s > $W/$s.txt 2>&1; echo "rc $?" >> $W/$s.txt; }
models() {
  inf resnet50_$1 /tmp/tv/resnet50.onnx --input input=/tmp/tv/resnet50.input.npy
  inf mobilenet_$1 /tmp/tv/mobilenet_v3_large.onnx --input input=/tmp/tv/mobilenet_v3_large.input.npy
  for m in det cls; do inf ${m}_$1 /tmp/$m.onnx --input x=/tmp/$m.input.npy; done
  inf whisper_$1 /tmp/wenc/encoder.onnx --input input_features=/tmp/wenc/input.npy
  inf bert_$1 $E/enc.onnx --input x=$E/features.npy
}
models warm; models 1; models 2; save
timeout 120 $PY scripts/encoder_baseline.py $E/enc.onnx $E/features.npy $W/torch_bert.json --iters 20 > $W/torch_bert.txt 2>&1
save; grep -E '"ms_median"|eager|graph' $W/torch_whisper.txt $W/torch_bert.json | head; cat $W/torch_tv.json
for f in $(ls $W | grep -E '_(1|2).txt$' | sort); do
  echo "== $f $(grep -o 'GPU [0-9.]* ms' $W/$f | head -1) $(grep -o 'replayed commands: [0-9]* dispatches' $W/$f) $(grep -hE '^rc [1-9]' $W/$f)"; done
