#!/usr/bin/env bash
# H200 session 12: record-once replay against recording every run, fully resident, fp16, batch 1
# (`texstream infer --repeat 30` with and without --no-replay: host before submit, submit to
# done, GPU time from timestamps), beside PyTorch fp16 eager and CUDA-graph replay on the same
# torchvision modules (scripts/kernel_baseline.py exports them), plus the three OCR models.
# Run from the repo root with the loader debs in .gl/ and .devbin/bundle.tar.xz (the release
# binary and the OCR models). Outputs: $OUT/k.tgz.
set -u
cd "$(dirname "$0")/../../.."
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
B=$PWD/.devbin
tar -xJf $B/bundle.tar.xz -C $B
T=$B/texstream
W=$OUT/w; mkdir -p $W/tv $W/o
PY=/opt/torch/.venv/bin/python3
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $W/gpu.txt
timeout 300 $PY scripts/kernel_baseline.py $W/tv --iters 50 > $W/torch.txt 2>&1
$PY - <<'PY'
import numpy as np, os
W = os.environ["OUT"] + "/w/tv"
rng = np.random.default_rng(0)
for name, shape in [("det", [1, 3, 384, 768]), ("cls", [1, 3, 48, 192]), ("rec", [1, 3, 48, 768])]:
    np.save(f"{W}/{name}.input.npy", rng.uniform(-1, 1, shape).astype(np.float32))
PY
for m in resnet18 resnet50 mobilenet_v3_large densenet121 det cls rec; do
  case $m in det|cls|rec) f=$B/models/ocr/$m.onnx; i=x ;; *) f=$W/tv/$m.onnx; i=input ;; esac
  for r in replay no-replay; do
    flag=""; [ $r = no-replay ] && flag=--no-replay
    timeout 150 $T infer $f --input $i=$W/tv/$m.input.npy -o $W/o --precision f16 --repeat 30 $flag > $W/$m.$r.txt 2>&1
    echo "rc $?" >> $W/$m.$r.txt
  done
done
rm -f $W/tv/*.onnx $W/tv/*.npy
tar czf $OUT/k.tgz -C $W .
cat $W/gpu.txt $W/torch.txt
for f in $W/*.replay.txt $W/*.no-replay.txt; do echo "$(basename $f): $(grep -E 'repeat runs|^rc|rror' $f | tr '\n' ' ')"; done
