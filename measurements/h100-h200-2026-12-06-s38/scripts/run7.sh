#!/usr/bin/env bash
# Session 38, run 7: tensor-core convolutions on the small and wide tiles split over reduction
# spans where their workgroups leave the device idle (.dev38/final3.xz), against the same binary
# with the split off (TEXSTREAM_CONV_SPLIT_K=1, which is run 6's convolutions): ResNet-50,
# MobileNetV3-Large, the PP-OCRv6 detector and classifier, two rounds after a warm-up; outputs
# against ONNX Runtime's for ResNet-50; kernel_conv on this card.
set -u
cd "$(dirname "$0")/../../.."
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
W=/tmp/d; mkdir -p /tmp/bin $W /tmp/tv
for b in final3 t_conv; do xz -dc .dev38/$b.xz > /tmp/bin/$b; done; chmod +x /tmp/bin/*
for m in det cls; do xz -dc .dev38/$m.onnx.xz > /tmp/$m.onnx; done
save() { tar czf $OUT/d.tgz -C $W .; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $W/gpu.txt 2>&1
( cd vk-backend && timeout 200 /tmp/bin/t_conv --test-threads 1 > $W/t_conv.txt 2>&1; echo "rc $?" >> $W/t_conv.txt ) &
timeout 200 $PY scripts/kernel_baseline.py /tmp/tv --models resnet50,mobilenet_v3_large --iters 50 > $W/torch_tv.txt 2>&1; cp /tmp/tv/torch.json $W/torch_tv.json 2>/dev/null
$PY - <<'PY'
import numpy as np
r = np.random.default_rng(0)
for m, s in (("det", [1, 3, 384, 768]), ("cls", [1, 3, 48, 192])):
    np.save(f"/tmp/{m}.input.npy", r.uniform(-1, 1, s).astype(np.float32))
PY
wait; save
inf() { local s=$1; shift; timeout 60 /tmp/bin/final3 infer "$@" --precision f16 --repeat 20 --profile 3 -o /tmp/o-$s > $W/$s.txt 2>&1; echo "rc $?" >> $W/$s.txt; }
models() {
  inf resnet50_$1 /tmp/tv/resnet50.onnx --input input=/tmp/tv/resnet50.input.npy
  inf mobilenet_$1 /tmp/tv/mobilenet_v3_large.onnx --input input=/tmp/tv/mobilenet_v3_large.input.npy
  for m in det cls; do inf ${m}_$1 /tmp/$m.onnx --input x=/tmp/$m.input.npy; done
}
models warm
for r in 1 2; do models split_$r; TEXSTREAM_CONV_SPLIT_K=1 models off_$r; done; save
$PY - > $W/compare.txt 2>&1 <<'PY'
import numpy as np, glob, onnxruntime as ort
x = np.load("/tmp/tv/resnet50.input.npy")
ref = ort.InferenceSession("/tmp/tv/resnet50.onnx", providers=["CPUExecutionProvider"]).run(None, {"input": x})[0]
for s in ("split_1", "off_1"):
    a = np.load(f"/tmp/o-resnet50_{s}/" + sorted(__import__("os").listdir(f"/tmp/o-resnet50_{s}"))[0])
    print("resnet50", s, "vs ORT max diff", float(np.abs(a - ref).max()), "range", float(ref.max() - ref.min()))
for m in ("resnet50", "mobilenet", "det", "cls"):
    for f in sorted(glob.glob(f"/tmp/o-{m}_off_1/*.npy")):
        a, b = np.load(f), np.load(f.replace("_off_1", "_split_1"))
        print(m, f.split("/")[-1], "split vs off", float(np.abs(a - b).max()), "range", float(a.max() - a.min()))
PY
save; cat $W/compare.txt; cat $W/torch_tv.json | grep -E "ms|resnet|mobile"
grep -hE "^test |^test result|FAILED|panicked|^rc" $W/t_conv.txt
for f in $(ls $W | grep -E '_(1|2).txt$' | sort); do
  echo "== $f $(grep -o 'GPU [0-9.]* ms' $W/$f | head -1) $(grep -o 'replayed commands: [0-9]* dispatches' $W/$f) $(grep -hE '^Conv ' $W/$f | tr -s ' ') $(grep -hE '^rc [1-9]' $W/$f)"; done
