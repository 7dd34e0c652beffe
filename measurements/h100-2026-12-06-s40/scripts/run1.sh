#!/usr/bin/env bash
# Session 40, run 1: convolutions on fewer than 16 output pixels (squeeze-and-excitation) on the
# split direct kernel instead of a tensor-core tile (.dev40/se.xz) against the build before
# (.dev40/base.xz, 32ac308), alternating; se also stages the ConvTranspose filter rows in shared memory and pools globally on 256 invocations by coordinates, on MobileNetV3-Large, the OCR classifier and detector;
# outputs against ONNX Runtime; PyTorch eager / CUDA graph / torch.compile on MobileNetV3-Large.
# Then the same binary with the pixel floor moved (TEXSTREAM_COOP_CONV_MIN_PIXELS 0 = the old
# rule, 50, 197) on those models and ResNet-50. Last, `texstream bench kernels` (images against
# storage buffers, copy bandwidths).
set -u
cd "$(dirname "$0")/../../.."
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
W=/tmp/s40r1; T=/tmp/s40tv1; mkdir -p /tmp/s40bin $W $T
for b in base se; do xz -dc .dev40/$b.xz > /tmp/s40bin/$b; done; chmod +x /tmp/s40bin/*
for m in cls det; do xz -dc .dev40/$m.onnx.xz > /tmp/s40$m.onnx; done
save() { tar czf $OUT/d.tgz -C $W .; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $W/gpu.txt 2>&1
timeout 200 $PY scripts/kernel_baseline.py $T --models mobilenet_v3_large,resnet50 --iters 30 --compile > $W/torch_tv.txt 2>&1
cp $T/torch.json $W/torch_tv.json 2>/dev/null
$PY -c "
import numpy as np
r = np.random.default_rng(0)
np.save('/tmp/s40cls.input.npy', r.uniform(-1, 1, (1, 3, 48, 192)).astype(np.float32))
np.save('/tmp/s40det.input.npy', r.uniform(-1, 1, (1, 3, 384, 768)).astype(np.float32))"
inf() { local b=$1 s=$2; shift 2; timeout 60 /tmp/s40bin/$b infer "$@" --precision f16 --repeat 20 --profile 3 -o /tmp/s40o1-$s > $W/$s.txt 2>&1; echo "rc $?" >> $W/$s.txt; }
for r in warm 1 2; do
  for b in base se; do
    inf $b mnv3_${b}_$r $T/mobilenet_v3_large.onnx --input input=$T/mobilenet_v3_large.input.npy
    inf $b cls_${b}_$r /tmp/s40cls.onnx --input x=/tmp/s40cls.input.npy
    inf $b det_${b}_$r /tmp/s40det.onnx --input x=/tmp/s40det.input.npy
  done
done
inf se mnv3_se_all $T/mobilenet_v3_large.onnx --input input=$T/mobilenet_v3_large.input.npy --profile-rows 100
for r in 1 2; do
  for p in 0 16 50 197; do
    export TEXSTREAM_COOP_CONV_MIN_PIXELS=$p
    inf se mnv3_px${p}_$r $T/mobilenet_v3_large.onnx --input input=$T/mobilenet_v3_large.input.npy
    inf se rn50_px${p}_$r $T/resnet50.onnx --input input=$T/resnet50.input.npy
    inf se cls_px${p}_$r /tmp/s40cls.onnx --input x=/tmp/s40cls.input.npy
    inf se det_px${p}_$r /tmp/s40det.onnx --input x=/tmp/s40det.input.npy
  done
done
unset TEXSTREAM_COOP_CONV_MIN_PIXELS
save
timeout 150 /tmp/s40bin/se bench kernels > $W/bench_kernels.txt 2>&1; echo "rc $?" >> $W/bench_kernels.txt
save
$PY - > $W/compare.txt 2>&1 <<'PY'
import numpy as np, os, onnxruntime as ort
def first(d): return np.load(os.path.join(d, sorted(os.listdir(d))[0]))
for m, path, inp, name in [("mnv3", "/tmp/s40tv1/mobilenet_v3_large.onnx", "/tmp/s40tv1/mobilenet_v3_large.input.npy", "input"), ("cls", "/tmp/s40cls.onnx", "/tmp/s40cls.input.npy", "x"), ("det", "/tmp/s40det.onnx", "/tmp/s40det.input.npy", "x")]:
    ref = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {name: np.load(inp)})[0]
    a, b = first(f"/tmp/s40o1-{m}_base_1"), first(f"/tmp/s40o1-{m}_se_1")
    print(m, "base vs ORT", float(np.abs(a - ref).max()), "se vs ORT", float(np.abs(b - ref).max()), "range", float(ref.max() - ref.min()), "base vs se", float(np.abs(a - b).max()))
PY
save; cat $W/compare.txt; grep -h '"\|ms' $W/torch_tv.txt | tail -5
for f in $(ls $W | grep -E '_(1|2).txt$' | sort); do
  echo "== $f $(grep -o 'GPU [0-9.]* ms' $W/$f | head -1) $(grep -E '^Conv ' $W/$f | tr -s ' ') $(grep -hE '^rc [1-9]' $W/$f)"; done
