#!/usr/bin/env bash
# H200 session 14, run 9: the wide cooperative tile with 32 k a step (KC 2, texstream_kc2)
# against 16 k a step (KC 1, run 5's binary), same call, each model alternately, fully
# resident, fp16, `texstream infer --repeat 30`, each output against ONNX Runtime.
# Carries .gl and .devbin (texstream.xz, texstream_kc2.xz, the OCR models). Outputs: $OUT/k.tgz.
set -u
cd "$(dirname "$0")/../../.."
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
B=$PWD/.devbin; W=/tmp/w; rm -rf $W; mkdir -p $W/tv $W/ocr /tmp/bin
for b in texstream texstream_kc2; do xz -dc $B/$b.xz > /tmp/bin/$b; chmod +x /tmp/bin/$b; done
for m in det cls rec; do xz -dc $B/ocr/$m.onnx.xz > $W/ocr/$m.onnx; done
PY=/opt/torch/.venv/bin/python3
timeout 240 $PY scripts/kernel_baseline.py $W/tv --iters 5 > $W/torch.txt 2>&1
$PY -c "
import numpy as np
rng = np.random.default_rng(0)
for n, s in [('det', [1, 3, 384, 768]), ('cls', [1, 3, 48, 192]), ('rec', [1, 3, 48, 768])]:
    np.save(f'/tmp/w/tv/{n}.input.npy', rng.uniform(-1, 1, s).astype(np.float32))
"
for m in resnet18 resnet50 densenet121 det rec; do
  case $m in det|cls|rec) f=$W/ocr/$m.onnx; i=x ;; *) f=$W/tv/$m.onnx; i=input ;; esac
  for round in 1 2; do
    for b in texstream texstream_kc2; do
      timeout 100 /tmp/bin/$b infer $f --input $i=$W/tv/$m.input.npy -o $W/o_$b --precision f16 --repeat 30 > $W/$m.$b.$round.txt 2>&1
      echo "rc $?" >> $W/$m.$b.$round.txt
    done
  done
  $PY -c "
import glob, os, re, numpy as np, onnxruntime as ort
s = ort.InferenceSession('$f', providers=['CPUExecutionProvider'])
names = [re.sub(r'[^A-Za-z0-9._-]', '_', o.name) for o in s.get_outputs()]
ref = dict(zip(names, s.run(None, {'$i': np.load('$W/tv/$m.input.npy')})))
for b in ['texstream', 'texstream_kc2']:
    for p in glob.glob('$W/o_' + b + '/*.npy'):
        r = ref.get(os.path.basename(p)[:-4])
        if r is None: continue
        g = np.load(p).astype(np.float64); r = r.astype(np.float64)
        print('$m', b, float(abs(g - r).max() / (r.max() - r.min())))
" >> $W/agree.txt 2>&1
  rm -rf $W/o_*
done
rm -rf $W/tv/*.onnx $W/tv/*.npy $W/ocr
tar czf $OUT/k.tgz -C $W .
cat $W/agree.txt
for f in $(ls $W/*.txt | sort); do case $f in *agree*|*torch*) continue ;; esac; echo "$(basename $f): $(grep -oE 'median [0-9.]+ ms|GPU [0-9.]+ ms' $f | tr '\n' ' ')"; done
