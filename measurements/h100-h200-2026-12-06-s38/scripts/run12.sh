#!/usr/bin/env bash
# Session 38, run 12: the small tile keeps a convolution whose subgroups take fewer than four
# steps (.dev38/final5.xz) against run 10's build (.dev38/final4.xz, which moved every small-tile
# convolution that the wide tile could split onto it): DenseNet-121, ResNet-50,
# MobileNetV3-Large, the PP-OCRv6 detector and classifier, two rounds after a warm-up.
set -u
cd "$(dirname "$0")/../../.."
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
W=/tmp/d12; mkdir -p /tmp/bin $W /tmp/tv12
for b in final4 final5; do xz -dc .dev38/$b.xz > /tmp/bin/$b; done; chmod +x /tmp/bin/*
for m in det cls; do xz -dc .dev38/$m.onnx.xz > /tmp/$m.onnx; done
save() { tar czf $OUT/d.tgz -C $W .; }
timeout 240 $PY scripts/kernel_baseline.py /tmp/tv12 --models resnet50,mobilenet_v3_large,densenet121 --iters 20 > $W/torch_tv.txt 2>&1
$PY - <<'PY'
import numpy as np
r = np.random.default_rng(0)
for m, s in (("det", [1, 3, 384, 768]), ("cls", [1, 3, 48, 192])):
    np.save(f"/tmp/{m}.input.npy", r.uniform(-1, 1, s).astype(np.float32))
PY
inf() { local s=$1 b=$2; shift 2; timeout 60 /tmp/bin/$b infer "$@" --precision f16 --repeat 20 --profile 3 -o /tmp/o12-$s > $W/$s.txt 2>&1; echo "rc $?" >> $W/$s.txt; }
models() {
  for m in densenet121 resnet50 mobilenet_v3_large; do inf ${m}_$1 $2 /tmp/tv12/$m.onnx --input input=/tmp/tv12/$m.input.npy; done
  for m in det cls; do inf ${m}_$1 $2 /tmp/$m.onnx --input x=/tmp/$m.input.npy; done
}
models warm4 final4; models warm5 final5
for r in 1 2; do models old_$r final4; models new_$r final5; done; save
for f in $(ls $W | grep -E '_(1|2).txt$' | sort); do
  echo "== $f $(grep -o 'GPU [0-9.]* ms' $W/$f | head -1) $(grep -o 'replayed commands: [0-9]* dispatches' $W/$f) $(grep -hE '^rc [1-9]' $W/$f)"; done
