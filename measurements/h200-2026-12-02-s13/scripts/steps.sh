#!/usr/bin/env bash
# H200 session 13, run 4: splits down to 2 reduction steps a lane (was 8), depthwise convolutions
# split over their taps (conv2d_dw_splitk.comp), and the texel packing that writes each texel
# once (inputs) or reads it once per plane run (outputs), against run 1's
# binary (texstream.s13a, b87f2c7); same models, inputs and settings as run 1 (splitk.sh), with
# per-node profiles. Outputs: $OUT/k.tgz.
set -u
cd "$(dirname "$0")/../../.."
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
B=$PWD/.devbin
tar -xJf $B/bundle.tar.xz -C $B
W=/tmp/w; rm -rf $W; mkdir -p $W/tv $W/o
PY=/opt/torch/.venv/bin/python3
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $W/gpu.txt
timeout 240 $PY scripts/kernel_baseline.py $W/tv --iters 50 > $W/torch.txt 2>&1
$PY - <<'PY'
import numpy as np, os
W = "/tmp/w/tv"
rng = np.random.default_rng(0)
for name, shape in [("det", [1, 3, 384, 768]), ("cls", [1, 3, 48, 192]), ("rec", [1, 3, 48, 768])]:
    np.save(f"{W}/{name}.input.npy", rng.uniform(-1, 1, shape).astype(np.float32))
PY
for m in resnet18 resnet50 mobilenet_v3_large densenet121 det cls rec; do
  case $m in det|cls|rec) f=$B/models/ocr/$m.onnx; i=x ;; *) f=$W/tv/$m.onnx; i=input ;; esac
  for bin in texstream texstream.s13a; do
    timeout 100 $B/$bin infer $f --input $i=$W/tv/$m.input.npy -o $W/o/$bin --precision f16 --repeat 30 > $W/$m.$bin.txt 2>&1
    echo "rc $?" >> $W/$m.$bin.txt
  done
  # Same outputs from both kernels (fp16: close, not bit-identical: the sums run in another order).
  $PY -c "
import numpy as np, glob, os
for a in glob.glob('$W/o/texstream/*.npy'):
    b = a.replace('/texstream/', '/texstream.s13a/')
    x, y = np.load(a).astype(np.float64), np.load(b).astype(np.float64)
    print('$m', os.path.basename(a), 'max|new-s13a|/range', float(abs(x-y).max() / (y.max()-y.min() + 1e-30)))
" >> $W/agree.txt 2>&1
  rm -rf $W/o/*
done
for m in resnet18 resnet50 mobilenet_v3_large; do
  timeout 100 $B/texstream infer $W/tv/$m.onnx --input input=$W/tv/$m.input.npy -o $W/o --precision f16 --profile 5 > $W/profile_$m.txt 2>&1
done
rm -rf $W/tv/*.onnx $W/tv/*.npy $W/o
tar czf $OUT/k.tgz -C $W .
cat $W/gpu.txt $W/torch.txt $W/agree.txt | grep -v Warn
for f in $W/*.texstream*.txt; do echo "$(basename $f): $(grep -E 'repeat runs|^rc|rror' $f | tr '\n' ' ')"; done
for m in resnet18 resnet50 mobilenet_v3_large; do head -24 $W/profile_$m.txt | tail -18; done
