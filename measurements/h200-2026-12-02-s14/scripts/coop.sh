#!/usr/bin/env bash
# H200 session 14: dense convolutions as an implicit GEMM on cooperative matrices
# (shaders/conv2d_coop*.comp) against the portable kernels of the same binary
# (TEXSTREAM_NO_COOPMAT=1), and from run 2 each tile forced (TEXSTREAM_COOP_CONV_TILE) and
# DenseNet's concatenations by whole texels (concat_c4.comp), fully resident, fp16, batch 1, replayed (`texstream infer --repeat
# 30`), beside PyTorch fp16 eager and CUDA-graph replay on the same torchvision modules
# (scripts/kernel_baseline.py), plus the three OCR models. Each output is compared with ONNX
# Runtime CPU in fp32 on the same file and input. First, vk-backend's kernel_conv (and from run 2
# kernel_copy) tests run with the Khronos validation layer on, where the implicit GEMM takes the
# fp16 dense cases. MODES (default "coop portable") picks the runs per model; PROFILE_TILES
# (small, wide, portable) and PROFILE_MODELS add per-node profiles.
# Carries: .gl (loader and validation-layer debs) and .devbin (texstream.xz, kernel_*.xz, the
# OCR models xz-compressed in ocr/, the call's size limit). Outputs: $OUT/c.tgz.
set -u
cd "$(dirname "$0")/../../.."
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
B=$PWD/.devbin
W=/tmp/w; rm -rf $W; mkdir -p $W/tv $W/o /tmp/bin
for b in texstream kernel_conv kernel_copy; do [ -f $B/$b.xz ] && xz -dc $B/$b.xz > /tmp/bin/$b; done
chmod +x /tmp/bin/*; export PATH=/tmp/bin:$PATH
mkdir -p $W/ocr; for m in det cls rec; do xz -dc $B/ocr/$m.onnx.xz > $W/ocr/$m.onnx; done
PY=/opt/torch/.venv/bin/python3
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $W/gpu.txt
for t in kernel_conv kernel_copy; do
  [ -x /tmp/bin/$t ] || continue
  TEXSTREAM_VALIDATION=1 timeout 120 $t --test-threads=1 > $W/$t.txt 2>&1; echo "rc $?" >> $W/$t.txt
done
export MODES=${MODES:-coop portable}
timeout 240 $PY scripts/kernel_baseline.py $W/tv --iters 50 > $W/torch.txt 2>&1
$PY - <<'PY'
import numpy as np
rng = np.random.default_rng(0)
for name, shape in [("det", [1, 3, 384, 768]), ("cls", [1, 3, 48, 192]), ("rec", [1, 3, 48, 768])]:
    np.save(f"/tmp/w/tv/{name}.input.npy", rng.uniform(-1, 1, shape).astype(np.float32))
PY
for m in resnet18 resnet50 mobilenet_v3_large densenet121 det cls rec; do
  case $m in det|cls|rec) f=$W/ocr/$m.onnx; i=x ;; *) f=$W/tv/$m.onnx; i=input ;; esac
  for mode in $MODES; do
    case $mode in portable) e=TEXSTREAM_NO_COOPMAT=1 ;; small|wide) e=TEXSTREAM_COOP_CONV_TILE=$mode ;; *) e=X=1 ;; esac
    env $e timeout 100 texstream infer $f \
      --input $i=$W/tv/$m.input.npy -o $W/o/$mode --precision f16 --repeat 30 > $W/$m.$mode.txt 2>&1
    echo "rc $?" >> $W/$m.$mode.txt
  done
  $PY - "$f" "$i" "$W/tv/$m.input.npy" "$m" >> $W/agree.txt 2>&1 <<'PY'
import glob, os, re, sys
import numpy as np, onnxruntime as ort
f, name, x, m = sys.argv[1:]
s = ort.InferenceSession(f, providers=["CPUExecutionProvider"])
names = [re.sub(r"[^A-Za-z0-9._-]", "_", o.name) for o in s.get_outputs()]
ref = dict(zip(names, s.run(None, {name: np.load(x)})))
for mode in os.environ.get("MODES", "coop portable").split():
    for p in sorted(glob.glob(f"/tmp/w/o/{mode}/*.npy")):
        out = os.path.basename(p)[:-4]
        r = ref.get(out)
        if r is None:
            continue
        got = np.load(p).astype(np.float64)
        r = r.astype(np.float64)
        print(m, mode, out, "max|texstream-ORT|/range", float(abs(got - r).max() / (r.max() - r.min() + 1e-30)))
PY
  rm -rf $W/o/*
done
for m in resnet18 resnet50 densenet121; do
  timeout 100 texstream infer $W/tv/$m.onnx --input input=$W/tv/$m.input.npy -o $W/o --precision f16 --profile 5 > $W/profile_$m.txt 2>&1
done
for tile in ${PROFILE_TILES:-}; do
  for m in ${PROFILE_MODELS:-resnet18 resnet50}; do
    case $tile in portable) e=TEXSTREAM_NO_COOPMAT=1 ;; *) e=TEXSTREAM_COOP_CONV_TILE=$tile ;; esac
    env $e timeout 100 texstream infer $W/tv/$m.onnx --input input=$W/tv/$m.input.npy -o $W/o --precision f16 --profile 5 > $W/profile_${m}_$tile.txt 2>&1
  done
done
rm -rf $W/tv/*.onnx $W/tv/*.npy $W/o $W/ocr
tar czf $OUT/c.tgz -C $W .
cat $W/gpu.txt $W/torch.txt $W/agree.txt | grep -v Warn
grep -hE "^test |test result|rc " $W/kernel_*.txt
for f in $W/*.*.txt; do case $f in *kernel_*|*profile_*) continue ;; esac; echo "$(basename $f): $(grep -E 'repeat runs|^rc|rror' $f | tr '\n' ' ')"; done
for m in resnet18 resnet50 densenet121; do head -24 $W/profile_$m.txt | tail -18; done
