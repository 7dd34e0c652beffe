#!/usr/bin/env bash
# Session 40, run 2: the split kernel's 1x1 path with four steps' loads in flight and filter rows
# read through their pages found once (the _plain kernels) (.dev40/sk.xz;
# also ConvTranspose's filter staging reverted) against run 1's build (.dev40/se1.xz),
# alternating, on MobileNetV3-Large, the OCR classifier and detector; outputs against ONNX
# Runtime. Then `sk` with the tensor-core pixel floor at 16 and 50; kernel_conv and kernel_pool (its 256-wide
# GlobalAveragePool, which lavapipe does not take) on the H100 (.dev40/kc.xz, kp.xz).
set -u
cd "$(dirname "$0")/../../.."
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
W=/tmp/s40r2; T=/tmp/s40tv2; mkdir -p /tmp/s40bin $W $T
for b in se1 sk kc kp; do xz -dc .dev40/$b.xz > /tmp/s40bin/$b; done; chmod +x /tmp/s40bin/*
for m in cls det; do xz -dc .dev40/$m.onnx.xz > /tmp/s40$m.onnx; done
save() { tar czf $OUT/d.tgz -C $W .; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $W/gpu.txt 2>&1
timeout 200 $PY scripts/kernel_baseline.py $T --models mobilenet_v3_large --iters 20 > $W/torch_tv.txt 2>&1
$PY -c "
import numpy as np
r = np.random.default_rng(0)
np.save('/tmp/s40cls.input.npy', r.uniform(-1, 1, (1, 3, 48, 192)).astype(np.float32))
np.save('/tmp/s40det.input.npy', r.uniform(-1, 1, (1, 3, 384, 768)).astype(np.float32))"
inf() { local b=$1 s=$2; shift 2; timeout 60 /tmp/s40bin/$b infer "$@" --precision f16 --repeat 20 --profile 3 --profile-rows 100 -o /tmp/s40o2-$s > $W/$s.txt 2>&1; echo "rc $?" >> $W/$s.txt; }
for r in warm 1 2; do
  for b in se1 sk; do
    inf $b mnv3_${b}_$r $T/mobilenet_v3_large.onnx --input input=$T/mobilenet_v3_large.input.npy
    inf $b cls_${b}_$r /tmp/s40cls.onnx --input x=/tmp/s40cls.input.npy
    inf $b det_${b}_$r /tmp/s40det.onnx --input x=/tmp/s40det.input.npy
  done
done
save
for p in 16 50; do TEXSTREAM_COOP_CONV_MIN_PIXELS=$p inf sk mnv3_px${p}_1 $T/mobilenet_v3_large.onnx --input input=$T/mobilenet_v3_large.input.npy; done
save
timeout 240 /tmp/s40bin/kc --test-threads=4 > $W/kernel_conv.txt 2>&1; echo "rc $?" >> $W/kernel_conv.txt
timeout 120 /tmp/s40bin/kp --test-threads=4 > $W/kernel_pool.txt 2>&1; echo "rc $?" >> $W/kernel_pool.txt
$PY - > $W/compare.txt 2>&1 <<'PY'
import numpy as np, os, onnxruntime as ort
def first(d): return np.load(os.path.join(d, sorted(os.listdir(d))[0]))
for m, path, inp, name in [("mnv3", "/tmp/s40tv2/mobilenet_v3_large.onnx", "/tmp/s40tv2/mobilenet_v3_large.input.npy", "input"), ("cls", "/tmp/s40cls.onnx", "/tmp/s40cls.input.npy", "x"), ("det", "/tmp/s40det.onnx", "/tmp/s40det.input.npy", "x")]:
    ref = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {name: np.load(inp)})[0]
    a, b = first(f"/tmp/s40o2-{m}_se1_1"), first(f"/tmp/s40o2-{m}_sk_1")
    print(m, "se1 vs ORT", float(np.abs(a - ref).max()), "sk vs ORT", float(np.abs(b - ref).max()), "range", float(ref.max() - ref.min()), "se1 vs sk", float(np.abs(a - b).max()))
PY
save; cat $W/compare.txt; tail -3 $W/kernel_conv.txt $W/kernel_pool.txt; grep -h "{" $W/torch_tv.txt | tail -2
for f in $(ls $W | grep -E '_(1|2).txt$' | sort); do
  echo "== $f $(grep -o 'GPU [0-9.]* ms' $W/$f | head -1) $(grep -E '^(Conv|Gemm|ConvTranspose) ' $W/$f | tr -s ' ' | tr '\n' '|') $(grep -hE '^rc [1-9]' $W/$f)"; done
