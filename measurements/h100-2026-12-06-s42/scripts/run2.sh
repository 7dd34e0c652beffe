#!/usr/bin/env bash
# Session 42, run 2: this session's build `nx` (.dev41/nx.xz, d4a80a2 + the input scale as a
# specialization constant: convolutions that scale their
# input's channels, squeeze-and-excitation Muls folded into them; units counted flat on CPU
# drivers only) against the session's starting build `hd` (.dev41/hd.xz, 8991c6a), alternating
# (a warm-up round, then two), on MobileNetV3-Large (torchvision, random weights: eight SE
# blocks, their projections on the tensor cores), the OCR classifier (48x192), the OCR detector
# (384x768) and ResNet-50 (no SE: the push constants' growth to 128 bytes only); outputs
# against ONNX Runtime CPU fp32.
set -u
cd "$(dirname "$0")/../../.."
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
W=/tmp/s42r2; T=/tmp/s42tv2; B=/tmp/s42bin2; mkdir -p $B $W $T
for b in hd nx; do xz -dc .dev41/$b.xz > $B/$b; done; chmod +x $B/*
xz -dc .dev41/det.onnx.xz > $T/det.onnx; xz -dc .dev41/cls.onnx.xz > $T/cls.onnx
save() { tar czf $OUT/d.tgz -C $W .; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $W/gpu.txt 2>&1
$PY - <<'PY'
import numpy as np, torch, torchvision.models as tvm
torch.manual_seed(0)
for name, ctor in [("mnv3", tvm.mobilenet_v3_large), ("rn50", tvm.resnet50)]:
    m = ctor(weights=None).eval()
    x = torch.from_numpy(np.random.default_rng(0).uniform(-1, 1, (1, 3, 224, 224)).astype(np.float32))
    np.save(f"/tmp/s42tv2/{name}.input.npy", x.numpy())
    torch.onnx.export(m, (x,), f"/tmp/s42tv2/{name}.onnx", input_names=["input"], output_names=["logits"], opset_version=17, dynamo=False)
r = np.random.default_rng(1)
np.save("/tmp/s42tv2/det.input.npy", r.uniform(-1, 1, (1, 3, 384, 768)).astype(np.float32))
np.save("/tmp/s42tv2/cls.input.npy", r.uniform(-1, 1, (1, 3, 48, 192)).astype(np.float32))
PY
inf() { local b=$1 s=$2; shift 2; timeout 60 $B/$b infer "$@" --precision f16 --repeat 20 --profile 3 -o /tmp/s42o2-$s > $W/$s.txt 2>&1; echo "rc $?" >> $W/$s.txt; }
for r in warm 1 2; do
  for b in hd nx; do
    inf $b mnv3_${b}_$r $T/mnv3.onnx --input input=$T/mnv3.input.npy
    inf $b cls_${b}_$r $T/cls.onnx --input x=$T/cls.input.npy
    inf $b det_${b}_$r $T/det.onnx --input x=$T/det.input.npy
    inf $b rn50_${b}_$r $T/rn50.onnx --input input=$T/rn50.input.npy
  done
done
save
$PY - > $W/compare.txt 2>&1 <<'PY'
import numpy as np, os, onnxruntime as ort
def first(d): return np.load(os.path.join(d, sorted(os.listdir(d))[0]))
T = "/tmp/s42tv2"
for m, name in [("mnv3", "input"), ("cls", "x"), ("det", "x"), ("rn50", "input")]:
    ref = ort.InferenceSession(f"{T}/{m}.onnx", providers=["CPUExecutionProvider"]).run(None, {name: np.load(f"{T}/{m}.input.npy")})[0]
    a, b = first(f"/tmp/s42o2-{m}_hd_1"), first(f"/tmp/s42o2-{m}_nx_1")
    print(m, "hd vs ORT", float(np.abs(a - ref).max()), "nx vs ORT", float(np.abs(b - ref).max()), "range", float(ref.max() - ref.min()), "hd vs nx", float(np.abs(a - b).max()))
PY
save; cat $W/gpu.txt $W/compare.txt
for f in $(ls $W | grep -E '_(1|2).txt$' | sort); do
  echo "== $f $(grep -o 'GPU [0-9.]* ms' $W/$f | head -1) $(grep -o 'replayed commands: [0-9]* dispatches' $W/$f) $(grep -hE '^rc [1-9]' $W/$f)"; done
