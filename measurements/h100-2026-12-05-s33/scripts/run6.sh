#!/usr/bin/env bash
# Session 33, run 6 (.devbin7/: texstream with the wide tensor-core attention's key spans
# aiming at 2 for the Whisper-tiny encoder; otherwise run 5's binary): run 5's rows that ran
# beside PyTorch's timing (the OCR detector, the BERT-base-shaped encoder) again alone, and the
# Whisper encoder by shape against 8 spans (run 5's default), alternating. Nothing else runs on
# the GPU during the texstream runs.
set -u
cd "$(dirname "$0")/../../.."
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
W=/tmp/d8; mkdir -p /tmp/bin $W
xz -dc .devbin7/ts.xz > /tmp/bin/ts; chmod +x /tmp/bin/*
xz -dc .devbin5/det.onnx.xz > /tmp/det.onnx
save() { tar czf $OUT/d.tgz -C $W .; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $W/gpu.txt 2>&1
$PY -c "import numpy as np; np.save('/tmp/det.input.npy', np.random.default_rng(0).uniform(-1, 1, [1, 3, 384, 768]).astype(np.float32))"
[ -e /tmp/wenc/encoder.onnx ] || timeout 100 $PY scripts/whisper_encoder_baseline.py /tmp/wenc --iters 3 > $W/torch_whisper.txt 2>&1
E=/tmp/enc; [ -e $E/enc.onnx ] || timeout 60 $PY scripts/make_scale_models.py $E --decoder 125m --reference > $W/gen_enc.txt 2>&1
inf() { local s=$1 e=$2; shift 2
  env $e timeout 60 /tmp/bin/ts infer "$@" --precision f16 --profile 3 -o /tmp/o8-$s > $W/$s.txt 2>&1; echo "rc $?" >> $W/$s.txt; }
timeout 60 /tmp/bin/ts infer /tmp/det.onnx --input x=/tmp/det.input.npy --precision f16 --repeat 30 -o /tmp/warm > /dev/null 2>&1
for i in 1 2; do
  inf det_$i X=1 /tmp/det.onnx --input x=/tmp/det.input.npy --repeat 20
  inf bert_$i X=1 $E/enc.onnx --input x=$E/features.npy --repeat 20
  inf whisper_$i X=1 /tmp/wenc/encoder.onnx --input input_features=/tmp/wenc/input.npy --repeat 20
  inf whisper8_$i TEXSTREAM_ATTENTION_SPLITS=8 /tmp/wenc/encoder.onnx --input input_features=/tmp/wenc/input.npy --repeat 20
done
save
$PY - > $W/compare.txt 2>&1 <<'PYEOF'
import numpy as np
import onnxruntime as ort
for name, model, feeds, out in (
        ('whisper', '/tmp/wenc/encoder.onnx', {'input_features': '/tmp/wenc/input.npy'}, 'last_hidden_state.npy'),
        ('bert', '/tmp/enc/enc.onnx', {'x': '/tmp/enc/features.npy'}, 'y.npy')):
    try:
        s = ort.InferenceSession(model, providers=['CPUExecutionProvider'])
        ref = s.run(None, {k: np.load(v) for k, v in feeds.items()})[0]
        y = np.load(f'/tmp/o8-{name}_1/{out}')
        print(name, 'vs ORT fp32: max diff', float(abs(y - ref).max()), 'range', float(ref.max() - ref.min()))
    except Exception as e:
        print(name, 'not compared:', e)
PYEOF
save
for f in det_1 det_2 bert_1 bert_2 whisper_1 whisper8_1 whisper_2 whisper8_2; do echo "== $f"; grep -hE "repeat runs|^Attention |^Conv " $W/$f.txt; done
cat $W/compare.txt
