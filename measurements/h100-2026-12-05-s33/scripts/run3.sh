#!/usr/bin/env bash
# Session 33, run 3 (.devbin5/: texstream and kernel_conv at the large convolution tile): dense
# convolutions on the tensor-core MatMul's 64x64 tile with four K groups
# (`conv2d_coop_large.comp`, TEXSTREAM_COOP_CONV_TILE=large) against the 32x32 tile (`wide`),
# alternating, on the Whisper-tiny encoder, ResNet-50 (torchvision, seeded random weights,
# scripts/kernel_baseline.py, with PyTorch fp16 eager and CUDA graph beside it) and the OCR
# detector (`texstream infer MODEL --precision f16 --repeat 20 --profile 3`, resident); outputs
# of both tiles compared; vk-backend's kernel_conv (every tile forced on every dense fp16 case)
# with the validation layer.
set -u
cd "$(dirname "$0")/../../.."
T0=$(date +%s)
left() { echo $(( 575 - ($(date +%s) - T0) )); }
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
W=/tmp/d5; mkdir -p /tmp/bin $W /tmp/tv
xz -dc .devbin5/ts.xz > /tmp/bin/ts; xz -dc .devbin5/kconv.xz > /tmp/bin/kconv; chmod +x /tmp/bin/*
xz -dc .devbin5/det.onnx.xz > /tmp/det.onnx
save() { tar czf $OUT/d.tgz -C $W .; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $W/gpu.txt 2>&1
(timeout 100 $PY scripts/whisper_encoder_baseline.py /tmp/wenc --iters 3 > $W/torch_whisper.txt 2>&1) &
TW=$!
(timeout 150 $PY scripts/kernel_baseline.py /tmp/tv --models resnet50 --iters 50 > $W/torch_resnet.txt 2>&1; cp /tmp/tv/torch.json $W/ 2>/dev/null) &
TR=$!
(cd vk-backend && TEXSTREAM_VALIDATION=1 timeout 120 /tmp/bin/kconv --test-threads=1 > $W/kernel_conv.txt 2>&1; echo "rc $?" >> $W/kernel_conv.txt)
$PY -c "import numpy as np; np.save('/tmp/det.input.npy', np.random.default_rng(0).uniform(-1, 1, [1, 3, 384, 768]).astype(np.float32))"
save
run() { # name model input-args
  local m=$1 f=$2; shift 2
  for t in wide large wide large; do
    s=$t; [ -e $W/${m}_$t.txt ] && s=${t}2
    TEXSTREAM_COOP_CONV_TILE=$t timeout 60 /tmp/bin/ts infer $f "$@" --precision f16 --repeat 20 --profile 3 -o /tmp/o-$m-$s > $W/${m}_$s.txt 2>&1; echo "rc $?" >> $W/${m}_$s.txt
  done
}
timeout 60 /tmp/bin/ts infer /tmp/det.onnx --input x=/tmp/det.input.npy --precision f16 --repeat 30 -o /tmp/warm > /dev/null 2>&1
run det /tmp/det.onnx --input x=/tmp/det.input.npy
save
wait $TW
run whisper /tmp/wenc/encoder.onnx --input input_features=/tmp/wenc/input.npy
save
wait $TR
run resnet50 /tmp/tv/resnet50.onnx --input input=/tmp/tv/resnet50.input.npy
save
$PY - > $W/compare.txt 2>&1 <<'PYEOF'
import numpy as np, glob, os
for m in ('det', 'whisper', 'resnet50'):
    for f in sorted(glob.glob(f'/tmp/o-{m}-wide/*.npy')):
        try:
            x, y = np.load(f), np.load(f.replace('-wide/', '-large/'))
            print(m, os.path.basename(f), 'large vs wide: max diff', float(abs(x - y).max()), 'range', float(x.max() - x.min()))
        except Exception as e:
            print(m, 'not compared:', e)
try:
    import onnxruntime as ort
    s = ort.InferenceSession('/tmp/tv/resnet50.onnx', providers=['CPUExecutionProvider'])
    ref = s.run(None, {'input': np.load('/tmp/tv/resnet50.input.npy')})[0]
    for t in ('wide', 'large'):
        y = np.load(glob.glob(f'/tmp/o-resnet50-{t}/*.npy')[0])
        print('resnet50', t, 'vs ORT fp32: max diff', float(abs(y - ref).max()), 'range', float(ref.max() - ref.min()))
except Exception as e:
    print('ORT not compared:', e)
PYEOF
save
tail -n 4 $W/kernel_conv.txt
for m in det whisper resnet50; do for s in wide large wide2 large2; do [ -e $W/${m}_$s.txt ] || continue; echo "== $m $s"; grep -hE "repeat runs|^Conv |replayed commands" $W/${m}_$s.txt; done; done
cat $W/compare.txt; tail -n 5 $W/torch_resnet.txt; grep -A3 resnet50 $W/torch.json | head
echo "elapsed $(( $(date +%s) - T0 )) s"
