#!/usr/bin/env bash
# H200 session 12, run 2: the replayed runs pack inputs in host memory and copy them into the
# staging in one write (run 1 packed into the staging in place); the OCR models and ResNet-50
# again with and without replay, and a per-node profile of ResNet-18 and ResNet-50
# (`texstream infer --profile 5`). Same setup as kernels.sh. Outputs: $OUT/k2.tgz.
set -u
cd "$(dirname "$0")/../../.."
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
B=$PWD/.devbin
tar -xJf $B/bundle.tar.xz -C $B
T=$B/texstream
W=$OUT/w; mkdir -p $W/tv $W/o
PY=/opt/torch/.venv/bin/python3
timeout 200 $PY scripts/kernel_baseline.py $W/tv --models resnet18,resnet50 --iters 50 > $W/torch.txt 2>&1
$PY - <<'PY'
import numpy as np, os
W = os.environ["OUT"] + "/w/tv"
rng = np.random.default_rng(0)
for name, shape in [("det", [1, 3, 384, 768]), ("cls", [1, 3, 48, 192]), ("rec", [1, 3, 48, 768])]:
    np.save(f"{W}/{name}.input.npy", rng.uniform(-1, 1, shape).astype(np.float32))
PY
for round in 1 2; do
for m in det cls rec resnet50; do
  case $m in det|cls|rec) f=$B/models/ocr/$m.onnx; i=x ;; *) f=$W/tv/$m.onnx; i=input ;; esac
  for r in replay no-replay; do
    flag=""; [ $r = no-replay ] && flag=--no-replay
    timeout 120 $T infer $f --input $i=$W/tv/$m.input.npy -o $W/o --precision f16 --repeat 30 $flag > $W/$m.$r.$round.txt 2>&1
    echo "rc $?" >> $W/$m.$r.$round.txt
  done
done
done
for m in resnet18 resnet50; do
  timeout 150 $T infer $W/tv/$m.onnx --input input=$W/tv/$m.input.npy -o $W/o --precision f16 --profile 5 > $W/profile_$m.txt 2>&1
done
rm -rf $W/tv/*.onnx $W/tv/*.npy $W/o
tar czf $OUT/k2.tgz -C $W .
cat $W/torch.txt | grep -v Warn
for f in $W/*.[12].txt; do echo "$(basename $f): $(grep -E 'repeat runs|rror' $f | tr '\n' ' ')"; done
head -40 $W/profile_resnet18.txt | tail -32
