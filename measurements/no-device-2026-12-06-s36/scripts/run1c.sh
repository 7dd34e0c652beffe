#!/usr/bin/env bash
# Session 36, run 1c: run 1b cut to what about 100 s of device time holds. The MatMul kernel
# tests of the tensor-core kernels with .devbin17 (the compensated B and the chained projections
# written as the next one's packed A among them), then the BERT-base-shaped encoder (made by
# scripts/make_scale_models.py) with .devbin15 (the build at c6dd9fc, `new`) against .devbin17
# with TEXSTREAM_MATMUL_PACKED_OUT=1 (`pout`) and with TEXSTREAM_ATTENTION_HEAD_COPIES=1
# (`copies`, on heads_from_rows.comp), alternating, outputs compared.
set -u
cd "$(dirname "$0")/../../.."
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
W=/tmp/d3; mkdir -p /tmp/bin $W
xz -dc .devbin15/ts.xz > /tmp/bin/new; xz -dc .devbin17/kernel_matmul.xz > /tmp/bin/km; xz -dc .devbin17/ts.xz > /tmp/bin/pout; chmod +x /tmp/bin/*
save() { tar czf $OUT/d.tgz -C $W .; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $W/gpu.txt 2>&1
E=/tmp/enc; (timeout 60 $PY scripts/make_scale_models.py $E --decoder 125m --reference > $W/gen_enc.txt 2>&1) &
(cd vk-backend && timeout 60 /tmp/bin/km --test-threads 1 compensated chained constant_b_on_cooperative > $W/kernel_matmul.txt 2>&1; echo "rc $?" >> $W/kernel_matmul.txt)
wait; save
inf() { local s=$1 b=$2; shift 2
  timeout 30 /tmp/bin/$b infer "$@" --precision f16 --profile 3 -o /tmp/o3-$s > $W/$s.txt 2>&1; echo "rc $?" >> $W/$s.txt; }
BE="$E/enc.onnx --input x=$E/features.npy --repeat 20"
inf warm new $BE
for r in 1 2; do
  inf bert_new_$r new $BE
  TEXSTREAM_MATMUL_PACKED_OUT=1 inf bert_pout_$r pout $BE
  TEXSTREAM_ATTENTION_HEAD_COPIES=1 inf bert_copies_$r pout $BE; save
done
$PY - > $W/compare.txt 2>&1 <<'PY'
import glob, os, numpy as np
for x, y in [("new", "pout"), ("new", "copies")]:
    for f in sorted(glob.glob(f"/tmp/o3-bert_{x}_1/*.npy")):
        g = f.replace(f"_{x}_1", f"_{y}_1")
        if os.path.exists(g):
            a, b = np.load(f), np.load(g)
            print("bert", x, y, os.path.basename(f), "max diff", float(np.abs(a - b).max()), "range", float(a.max() - a.min()))
PY
save
grep -E "^test |test result|FAILED|panicked|^rc" $W/kernel_matmul.txt
cat $W/compare.txt
for f in $(ls $W | grep -E '^bert_' | sort); do
  echo "== $f $(grep -o 'GPU [0-9.]* ms' $W/$f | head -1) $(grep -o 'median [0-9.]* ms' $W/$f | head -1)"; grep -hE "^MatMul |^Attention |^Transpose |^Copy " $W/$f | head -4; done
