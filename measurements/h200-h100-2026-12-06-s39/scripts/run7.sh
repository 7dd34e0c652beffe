#!/usr/bin/env bash
# Session 39, run 7: small-tile convolutions with short reductions and few workgroups split over
# four spans (.dev39/ts5.xz, short_split_spans) against the build before (.dev39/ts4.xz), on
# DenseNet-121, ResNet-50, MobileNetV3-Large and the OCR classifier, alternating, outputs against
# ONNX Runtime; kernel_conv on the device (.dev39/kc5.xz).
set -u
cd "$(dirname "$0")/../../.."
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
W=/tmp/s39r7; T=/tmp/s39tv7; mkdir -p /tmp/s39bin $W $T
for b in ts4 ts5 kc5; do xz -dc .dev39/$b.xz > /tmp/s39bin/$b; done; chmod +x /tmp/s39bin/*
xz -dc .dev39/cls.onnx.xz > /tmp/s39cls.onnx
save() { tar czf $OUT/d.tgz -C $W .; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $W/gpu.txt 2>&1
timeout 120 $PY scripts/kernel_baseline.py $T --models densenet121,resnet50,mobilenet_v3_large --iters 10 > $W/torch_tv.txt 2>&1
$PY -c "import numpy as np; np.save('/tmp/s39cls.input.npy', np.random.default_rng(0).uniform(-1, 1, (1, 3, 48, 192)).astype(np.float32))"
inf() { local b=$1 s=$2; shift 2; timeout 60 /tmp/s39bin/$b infer "$@" --precision f16 --repeat 20 --profile 3 -o /tmp/s39o7-$s > $W/$s.txt 2>&1; echo "rc $?" >> $W/$s.txt; }
for r in warm 1 2; do
  for b in ts4 ts5; do
    for m in densenet121 resnet50 mobilenet_v3_large; do inf $b ${m}_${b}_$r $T/$m.onnx --input input=$T/$m.input.npy; done
    inf $b cls_${b}_$r /tmp/s39cls.onnx --input x=/tmp/s39cls.input.npy
  done
done
save
timeout 240 /tmp/s39bin/kc5 --test-threads=4 > $W/kernel_conv.txt 2>&1; echo "rc $?" >> $W/kernel_conv.txt
$PY - > $W/compare.txt 2>&1 <<'PY'
import numpy as np, os, onnxruntime as ort
def first(d): return np.load(os.path.join(d, sorted(os.listdir(d))[0]))
for m, path, inp, name in [(m, f"/tmp/s39tv7/{m}.onnx", f"/tmp/s39tv7/{m}.input.npy", "input") for m in ("densenet121", "resnet50", "mobilenet_v3_large")] + [("cls", "/tmp/s39cls.onnx", "/tmp/s39cls.input.npy", "x")]:
    ref = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {name: np.load(inp)})[0]
    a, b = first(f"/tmp/s39o7-{m}_ts4_1"), first(f"/tmp/s39o7-{m}_ts5_1")
    print(m, "ts4 vs ORT", float(np.abs(a - ref).max()), "ts5 vs ORT", float(np.abs(b - ref).max()), "range", float(ref.max() - ref.min()), "ts4 vs ts5", float(np.abs(a - b).max()))
PY
save; cat $W/compare.txt; tail -3 $W/kernel_conv.txt
for f in $(ls $W | grep -E '_(1|2).txt$' | sort); do
  echo "== $f $(grep -o 'GPU [0-9.]* ms' $W/$f | head -1) $(grep -E '^Conv ' $W/$f | tr -s ' ') $(grep -hE '^rc [1-9]' $W/$f)"; done
