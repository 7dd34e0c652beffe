#!/usr/bin/env bash
# Session 38, run 10: the kernel table on the session's end (.dev38/final4.xz, 6672c92),
# resident fp16 batch 1, two rounds after a warm-up, PyTorch fp16 beside each model it can run
# (scripts/kernel_baseline.py for ResNet-50, MobileNetV3-Large and DenseNet-121; the encoders'
# scripts for Whisper-tiny and the BERT-base-shaped encoder); the OCR detector and classifier.
set -u
cd "$(dirname "$0")/../../.."
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
W=/tmp/d10; mkdir -p /tmp/bin $W /tmp/tv10
xz -dc .dev38/final4.xz > /tmp/bin/ts; chmod +x /tmp/bin/ts
for m in det cls; do xz -dc .dev38/$m.onnx.xz > /tmp/$m.onnx; done
save() { tar czf $OUT/d.tgz -C $W .; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $W/gpu.txt 2>&1
timeout 240 $PY scripts/kernel_baseline.py /tmp/tv10 --models resnet50,mobilenet_v3_large,densenet121 --iters 50 > $W/torch_tv.txt 2>&1; cp /tmp/tv10/torch.json $W/torch_tv.json 2>/dev/null
timeout 100 $PY scripts/whisper_encoder_baseline.py /tmp/wenc --iters 10 > $W/torch_whisper.txt 2>&1
E=/tmp/enc; timeout 60 $PY scripts/make_scale_models.py $E --decoder 125m --reference > $W/gen_enc.txt 2>&1
$PY - <<'PY'
import numpy as np
r = np.random.default_rng(0)
for m, s in (("det", [1, 3, 384, 768]), ("cls", [1, 3, 48, 192])):
    np.save(f"/tmp/{m}.input.npy", r.uniform(-1, 1, s).astype(np.float32))
PY
save
inf() { local s=$1; shift; timeout 60 /tmp/bin/ts infer "$@" --precision f16 --repeat 20 --profile 3 -o /tmp/o10-$s > $W/$s.txt 2>&1; echo "rc $?" >> $W/$s.txt; }
models() {
  for m in resnet50 mobilenet_v3_large densenet121; do inf ${m}_$1 /tmp/tv10/$m.onnx --input input=/tmp/tv10/$m.input.npy; done
  for m in det cls; do inf ${m}_$1 /tmp/$m.onnx --input x=/tmp/$m.input.npy; done
  inf whisper_$1 /tmp/wenc/encoder.onnx --input input_features=/tmp/wenc/input.npy
  inf bert_$1 $E/enc.onnx --input x=$E/features.npy
}
models warm; models 1; models 2; save
timeout 120 $PY scripts/encoder_baseline.py $E/enc.onnx $E/features.npy $W/torch_bert.json --iters 20 --texstream-output /tmp/o10-bert_1/y.npy > $W/torch_bert.txt 2>&1
$PY - > $W/compare.txt 2>&1 <<'PY'
import numpy as np, os, onnxruntime as ort
for m in ("resnet50", "mobilenet_v3_large", "densenet121"):
    x = np.load(f"/tmp/tv10/{m}.input.npy")
    ref = ort.InferenceSession(f"/tmp/tv10/{m}.onnx", providers=["CPUExecutionProvider"]).run(None, {"input": x})[0]
    d = f"/tmp/o10-{m}_1"
    a = np.load(os.path.join(d, sorted(os.listdir(d))[0]))
    print(m, "vs ORT max diff", float(np.abs(a - ref).max()), "range", float(ref.max() - ref.min()))
ref = np.load("/tmp/wenc/ort.npy").reshape(-1)
a = np.load("/tmp/o10-whisper_1/last_hidden_state.npy").reshape(-1)
print("whisper vs ORT max diff", float(np.abs(a - ref).max()), "range", float(ref.max() - ref.min()))
PY
save; cat $W/compare.txt; cat $W/torch_tv.json; grep -E '"ms_median"|texstream_vs_ort' $W/torch_whisper.txt $W/torch_bert.json
for f in $(ls $W | grep -E '_(1|2).txt$' | sort); do
  echo "== $f $(grep -o 'GPU [0-9.]* ms' $W/$f | head -1) $(grep -o 'replayed commands: [0-9]* dispatches' $W/$f) $(grep -hE '^rc [1-9]' $W/$f)"; done
