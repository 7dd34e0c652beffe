#!/usr/bin/env bash
# Session 38, run 9: a residual Add joining the convolution that makes one of its operands
# (then its ReLU too; .dev38/final4.xz) against run 7's build (.dev38/final3.xz): ResNet-50,
# MobileNetV3-Large, the PP-OCRv6 detector and classifier, two rounds after a warm-up;
# outputs against each other and ResNet-50's against ONNX Runtime.
set -u
cd "$(dirname "$0")/../../.."
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
W=/tmp/d9; mkdir -p /tmp/bin $W /tmp/tv
for b in final3 final4; do xz -dc .dev38/$b.xz > /tmp/bin/$b; done; chmod +x /tmp/bin/*
for m in det cls; do xz -dc .dev38/$m.onnx.xz > /tmp/$m.onnx; done
save() { tar czf $OUT/d.tgz -C $W .; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $W/gpu.txt 2>&1
[ -e /tmp/tv/mobilenet_v3_large.onnx ] || timeout 200 $PY scripts/kernel_baseline.py /tmp/tv --models resnet50,mobilenet_v3_large --iters 50 > $W/torch_tv.txt 2>&1
$PY - <<'PY'
import numpy as np
r = np.random.default_rng(0)
for m, s in (("det", [1, 3, 384, 768]), ("cls", [1, 3, 48, 192])):
    np.save(f"/tmp/{m}.input.npy", r.uniform(-1, 1, s).astype(np.float32))
PY
inf() { local s=$1 b=$2; shift 2; timeout 60 /tmp/bin/$b infer "$@" --precision f16 --repeat 20 --profile 3 -o /tmp/o9-$s > $W/$s.txt 2>&1; echo "rc $?" >> $W/$s.txt; }
models() {
  inf resnet50_$1 $2 /tmp/tv/resnet50.onnx --input input=/tmp/tv/resnet50.input.npy
  inf mobilenet_$1 $2 /tmp/tv/mobilenet_v3_large.onnx --input input=/tmp/tv/mobilenet_v3_large.input.npy
  for m in det cls; do inf ${m}_$1 $2 /tmp/$m.onnx --input x=/tmp/$m.input.npy; done
}
models warm3 final3; models warm4 final4
for r in 1 2; do models old_$r final3; models new_$r final4; done; save
$PY - > $W/compare.txt 2>&1 <<'PY'
import numpy as np, glob, os, onnxruntime as ort
x = np.load("/tmp/tv/resnet50.input.npy")
ref = ort.InferenceSession("/tmp/tv/resnet50.onnx", providers=["CPUExecutionProvider"]).run(None, {"input": x})[0]
for s in ("old_1", "new_1"):
    d = f"/tmp/o9-resnet50_{s}"
    a = np.load(os.path.join(d, sorted(os.listdir(d))[0]))
    print("resnet50", s, "vs ORT max diff", float(np.abs(a - ref).max()), "range", float(ref.max() - ref.min()))
for m in ("resnet50", "mobilenet", "det", "cls"):
    for f in sorted(glob.glob(f"/tmp/o9-{m}_old_1/*.npy")):
        a, b = np.load(f), np.load(f.replace("_old_1", "_new_1"))
        print(m, f.split("/")[-1], "new vs old", float(np.abs(a - b).max()), "range", float(a.max() - a.min()))
PY
save; cat $W/compare.txt; grep -h cuda_graph $W/torch_tv.txt 2>/dev/null | head -3
for f in $(ls $W | grep -E '_(1|2).txt$' | sort); do
  echo "== $f $(grep -o 'GPU [0-9.]* ms' $W/$f | head -1) $(grep -o 'replayed commands: [0-9]* dispatches' $W/$f) $(grep -hE '^(Conv|Binary|Unary) ' $W/$f | tr -s ' ' | tr '\n' ';') $(grep -hE '^rc [1-9]' $W/$f)"; done
