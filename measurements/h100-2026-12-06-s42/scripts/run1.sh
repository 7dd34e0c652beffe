#!/usr/bin/env bash
# Session 42, run 1 (was session 41 run 3, never run): the build of run 2 (.dev41/nw.xz, 8991c6a) against session 40 run 1's
# `se` (.dev41/se1.xz), alternating, on the OCR detector (384x768: session 40's filter rows
# without the page table and split-kernel 1x1 path, never measured on a card), the OCR
# classifier (48x192) and ResNet-50 (torchvision, random weights); outputs against ONNX Runtime.
set -u
cd "$(dirname "$0")/../../.."
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
W=/tmp/s42r1; T=/tmp/s42tv1; B=/tmp/s42bin1; mkdir -p $B $W $T
for b in se1 nw; do xz -dc .dev41/$b.xz > $B/$b; done; chmod +x $B/*
xz -dc .dev41/det.onnx.xz > $T/det.onnx; xz -dc .dev41/cls.onnx.xz > $T/cls.onnx
save() { tar czf $OUT/d.tgz -C $W .; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $W/gpu.txt 2>&1
$PY - <<'PY'
import numpy as np, torch, torchvision.models as tvm
torch.manual_seed(0)
m = tvm.resnet50(weights=None).eval()
x = torch.from_numpy(np.random.default_rng(0).uniform(-1, 1, (1, 3, 224, 224)).astype(np.float32))
np.save("/tmp/s42tv1/rn50.input.npy", x.numpy())
torch.onnx.export(m, (x,), "/tmp/s42tv1/rn50.onnx", input_names=["input"], output_names=["logits"], opset_version=17, dynamo=False)
r = np.random.default_rng(1)
np.save("/tmp/s42tv1/det.input.npy", r.uniform(-1, 1, (1, 3, 384, 768)).astype(np.float32))
np.save("/tmp/s42tv1/cls.input.npy", r.uniform(-1, 1, (1, 3, 48, 192)).astype(np.float32))
PY
inf() { local b=$1 s=$2; shift 2; timeout 60 $B/$b infer "$@" --precision f16 --repeat 20 --profile 3 -o /tmp/s42o1-$s > $W/$s.txt 2>&1; echo "rc $?" >> $W/$s.txt; }
for r in warm 1; do
  for b in se1 nw; do
    inf $b det_${b}_$r $T/det.onnx --input x=$T/det.input.npy
    inf $b cls_${b}_$r $T/cls.onnx --input x=$T/cls.input.npy
    inf $b rn50_${b}_$r $T/rn50.onnx --input input=$T/rn50.input.npy
  done
done
save
$PY - > $W/compare.txt 2>&1 <<'PY'
import numpy as np, os, onnxruntime as ort
def first(d): return np.load(os.path.join(d, sorted(os.listdir(d))[0]))
T = "/tmp/s42tv1"
for m, name in [("det", "x"), ("cls", "x"), ("rn50", "input")]:
    ref = ort.InferenceSession(f"{T}/{m}.onnx", providers=["CPUExecutionProvider"]).run(None, {name: np.load(f"{T}/{m}.input.npy")})[0]
    a, b = first(f"/tmp/s42o1-{m}_se1_1"), first(f"/tmp/s42o1-{m}_nw_1")
    print(m, "se1 vs ORT", float(np.abs(a - ref).max()), "nw vs ORT", float(np.abs(b - ref).max()), "range", float(ref.max() - ref.min()), "se1 vs nw", float(np.abs(a - b).max()))
PY
save; cat $W/gpu.txt $W/compare.txt
for f in $(ls $W | grep -E '_(1|2).txt$' | sort); do
  echo "== $f $(grep -o 'GPU [0-9.]* ms' $W/$f | head -1) $(grep -hE '^rc [1-9]' $W/$f)"; done
