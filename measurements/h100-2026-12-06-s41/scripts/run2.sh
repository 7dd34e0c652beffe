#!/usr/bin/env bash
# Session 41, run 2: the build with matmul_const_short.comp only where the device runs few
# invocations at once and short layers stacked only where that saves a third of the memory
# (Device::fold_layout; .dev41/nw.xz, built from 2e0b674) against session 40 run 1's `se`
# (.dev41/se1.xz) on the OCR recognizer (48x320, packed) and MobileNetV3-Large; the new build
# again with every short layer kept (TEXSTREAM_PAD_SHORT_LAYERS=0) and every one stacked (=1),
# to see what the driver's answers chose (the activation arena's bytes) and what the folds cost
# on the card; kernel_matmul.
set -u
cd "$(dirname "$0")/../../.."
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
W=/tmp/s41r2; T=/tmp/s41tv; B=/tmp/s41bin; mkdir -p $B $W $T
for b in se1 nw km; do xz -dc .dev41/$b.xz > $B/$b; done; chmod +x $B/*
xz -dc .dev41/rec.tspk.xz > $T/rec.tspk
save() { tar czf $OUT/d.tgz -C $W .; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $W/gpu.txt 2>&1
[ -f $T/mnv3.onnx ] || $PY - <<'PY'
import numpy as np, torch, torchvision.models as tvm
torch.manual_seed(0)
m = tvm.mobilenet_v3_large(weights=None).eval()
x = torch.from_numpy(np.random.default_rng(0).uniform(-1, 1, (1, 3, 224, 224)).astype(np.float32))
np.save("/tmp/s41tv/mnv3.input.npy", x.numpy())
torch.onnx.export(m, (x,), "/tmp/s41tv/mnv3.onnx", input_names=["input"], output_names=["logits"], opset_version=17, dynamo=False)
PY
inf() { local b=$1 s=$2; shift 2; timeout 60 $B/$b infer "$@" --precision f16 --repeat 20 --profile 3 -o /tmp/s41o2-$s > $W/$s.txt 2>&1; echo "rc $?" >> $W/$s.txt; }
for r in warm 1 2; do
  inf se1 rec_se1_$r $T/rec.tspk --input x=.dev41/rec320.npy
  inf nw rec_nw_$r $T/rec.tspk --input x=.dev41/rec320.npy
  TEXSTREAM_PAD_SHORT_LAYERS=0 inf nw rec_nw-flat_$r $T/rec.tspk --input x=.dev41/rec320.npy
  TEXSTREAM_PAD_SHORT_LAYERS=1 inf nw rec_nw-stack_$r $T/rec.tspk --input x=.dev41/rec320.npy
  inf nw mnv3_nw_$r $T/mnv3.onnx --input input=$T/mnv3.input.npy
  TEXSTREAM_PAD_SHORT_LAYERS=0 inf nw mnv3_nw-flat_$r $T/mnv3.onnx --input input=$T/mnv3.input.npy
done
save
timeout 120 $B/km --test-threads=8 > $W/kernel_matmul.txt 2>&1; echo "rc $?" >> $W/kernel_matmul.txt
$PY - > $W/compare.txt 2>&1 <<'PY'
import numpy as np, os
def first(d): return np.load(os.path.join(d, sorted(os.listdir(d))[0]))
a = first("/tmp/s41o2-rec_se1_1")
for v in ["nw", "nw-flat", "nw-stack"]:
    b = first(f"/tmp/s41o2-rec_{v}_1")
    print("rec se1 vs", v, float(np.abs(a - b).max()), "range", float(a.max() - a.min()))
a, b = first("/tmp/s41o2-mnv3_nw_1"), first("/tmp/s41o2-mnv3_nw-flat_1")
print("mnv3 nw vs nw-flat", float(np.abs(a - b).max()))
PY
save; cat $W/gpu.txt $W/compare.txt; tail -3 $W/kernel_matmul.txt
for f in $(ls $W | grep -E '_(1|2).txt$' | sort); do
  echo "== $f $(grep -o 'GPU [0-9.]* ms' $W/$f | head -1) $(grep -o 'activation arena: [0-9]* images, [0-9]* bytes' $W/$f) $(grep -hE '^rc [1-9]' $W/$f)"; done
