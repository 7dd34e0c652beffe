#!/usr/bin/env bash
# Session 41, run 1: this session's build (.dev41/nw.xz: session 40's split-kernel 1x1 path and
# filter rows without the page table, plus matmul_const_short.comp and concat_texels.comp)
# against session 40 run 1's `se` (.dev41/se1.xz), alternating, on MobileNetV3-Large and the
# OCR recognizer (48x320, packed by `texstream compile`); outputs against ONNX Runtime
# (recognizer: the two builds against each other); kernel_matmul on the card. (The detector
# and kernel_conv did not fit the carry limit beside them.)
set -u
cd "$(dirname "$0")/../../.."
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
W=/tmp/s41r1; T=/tmp/s41tv; B=/tmp/s41bin; mkdir -p $B $W $T
for b in se1 nw km; do xz -dc .dev41/$b.xz > $B/$b; done; chmod +x $B/*
xz -dc .dev41/rec.tspk.xz > $T/rec.tspk
save() { tar czf $OUT/d.tgz -C $W .; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $W/gpu.txt 2>&1
$PY - <<'PY'
import numpy as np, torch, torchvision.models as tvm
torch.manual_seed(0)
m = tvm.mobilenet_v3_large(weights=None).eval()
x = torch.from_numpy(np.random.default_rng(0).uniform(-1, 1, (1, 3, 224, 224)).astype(np.float32))
np.save("/tmp/s41tv/mnv3.input.npy", x.numpy())
torch.onnx.export(m, (x,), "/tmp/s41tv/mnv3.onnx", input_names=["input"], output_names=["logits"], opset_version=17, dynamo=False)
PY
inf() { local b=$1 s=$2; shift 2; timeout 60 $B/$b infer "$@" --precision f16 --repeat 20 --profile 3 -o /tmp/s41o-$s > $W/$s.txt 2>&1; echo "rc $?" >> $W/$s.txt; }
for r in warm 1 2; do
  for b in se1 nw; do
    inf $b mnv3_${b}_$r $T/mnv3.onnx --input input=$T/mnv3.input.npy
    inf $b rec_${b}_$r $T/rec.tspk --input x=.dev41/rec320.npy
  done
done
save
timeout 100 $B/km --test-threads=8 > $W/kernel_matmul.txt 2>&1; echo "rc $?" >> $W/kernel_matmul.txt
$PY - > $W/compare.txt 2>&1 <<'PY'
import numpy as np, os, onnxruntime as ort
def first(d): return np.load(os.path.join(d, sorted(os.listdir(d))[0]))
for m, path, inp, name in [("mnv3", "/tmp/s41tv/mnv3.onnx", "/tmp/s41tv/mnv3.input.npy", "input")]:
    ref = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {name: np.load(inp)})[0]
    a, b = first(f"/tmp/s41o-{m}_se1_1"), first(f"/tmp/s41o-{m}_nw_1")
    print(m, "se1 vs ORT", float(np.abs(a - ref).max()), "nw vs ORT", float(np.abs(b - ref).max()), "range", float(ref.max() - ref.min()), "se1 vs nw", float(np.abs(a - b).max()))
a, b = first("/tmp/s41o-rec_se1_1"), first("/tmp/s41o-rec_nw_1")
print("rec se1 vs nw", float(np.abs(a - b).max()), "range", float(a.max() - a.min()), "argmax agree", float((a.argmax(-1) == b.argmax(-1)).mean()))
PY
for f in $(ls $W | grep -E '_(1|2).txt$' | sort); do
  echo "== $f $(grep -o 'GPU [0-9.]* ms' $W/$f | head -1) $(grep -hE '^rc [1-9]' $W/$f)"; done
for f in rec_se1_1 rec_nw_1; do grep -E 'MatMul|Concat' $W/$f.txt | head -8; done
