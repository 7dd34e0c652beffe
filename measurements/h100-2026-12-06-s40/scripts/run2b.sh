#!/usr/bin/env bash
# Session 40, run 2 cut to what the device time left allows: .dev40/sk.xz (fd8fe87's kernels:
# the split kernel's 1x1 path with four steps' loads in flight, filter rows read through their
# pages found once) against .dev40/se1.xz (run 1's `se`), alternating, on MobileNetV3-Large and
# the OCR detector; outputs against ONNX Runtime; kernel_conv on the H100 (.dev40/kc.xz).
set -u
cd "$(dirname "$0")/../../.."
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
W=/tmp/s40r2; T=/tmp/s40tv2; mkdir -p /tmp/s40bin $W $T
for b in se1 sk kc; do xz -dc .dev40/$b.xz > /tmp/s40bin/$b; done; chmod +x /tmp/s40bin/*
xz -dc .dev40/det.onnx.xz > /tmp/s40det.onnx
save() { tar czf $OUT/d.tgz -C $W .; }
$PY - <<'PY'
import numpy as np, torch, torchvision.models as tvm
torch.manual_seed(0)
m = tvm.mobilenet_v3_large(weights=None).eval()
x = torch.from_numpy(np.random.default_rng(0).uniform(-1, 1, (1, 3, 224, 224)).astype(np.float32))
np.save("/tmp/s40tv2/mnv3.input.npy", x.numpy())
torch.onnx.export(m, (x,), "/tmp/s40tv2/mnv3.onnx", input_names=["input"], output_names=["logits"], opset_version=17, dynamo=False)
r = np.random.default_rng(0); r.uniform(-1, 1, (1, 3, 48, 192))
np.save("/tmp/s40det.input.npy", r.uniform(-1, 1, (1, 3, 384, 768)).astype(np.float32))
PY
inf() { local b=$1 s=$2; shift 2; timeout 60 /tmp/s40bin/$b infer "$@" --precision f16 --repeat 20 --profile 3 -o /tmp/s40o2-$s > $W/$s.txt 2>&1; echo "rc $?" >> $W/$s.txt; }
for r in warm 1 2; do
  for b in se1 sk; do
    inf $b mnv3_${b}_$r $T/mnv3.onnx --input input=$T/mnv3.input.npy
    inf $b det_${b}_$r /tmp/s40det.onnx --input x=/tmp/s40det.input.npy
  done
done
save
timeout 100 /tmp/s40bin/kc --test-threads=8 > $W/kernel_conv.txt 2>&1; echo "rc $?" >> $W/kernel_conv.txt
$PY - > $W/compare.txt 2>&1 <<'PY'
import numpy as np, os, onnxruntime as ort
def first(d): return np.load(os.path.join(d, sorted(os.listdir(d))[0]))
for m, path, inp, name in [("mnv3", "/tmp/s40tv2/mnv3.onnx", "/tmp/s40tv2/mnv3.input.npy", "input"), ("det", "/tmp/s40det.onnx", "/tmp/s40det.input.npy", "x")]:
    ref = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {name: np.load(inp)})[0]
    a, b = first(f"/tmp/s40o2-{m}_se1_1"), first(f"/tmp/s40o2-{m}_sk_1")
    print(m, "se1 vs ORT", float(np.abs(a - ref).max()), "sk vs ORT", float(np.abs(b - ref).max()), "range", float(ref.max() - ref.min()), "se1 vs sk", float(np.abs(a - b).max()))
PY
save; cat $W/compare.txt; tail -3 $W/kernel_conv.txt
for f in $(ls $W | grep -E '_(1|2).txt$' | sort); do
  echo "== $f $(grep -o 'GPU [0-9.]* ms' $W/$f | head -1) $(grep -E '^(Conv|GlobalAveragePool|ConvTranspose) ' $W/$f | tr -s ' ' | tr '\n' '|') $(grep -hE '^rc [1-9]' $W/$f)"; done
