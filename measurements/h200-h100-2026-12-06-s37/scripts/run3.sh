#!/usr/bin/env bash
# Session 37, run 3: the build with the packed MLP output on by default and the attention's
# subgroup barriers, rotated keys and joined key/value loads (.dev37/ts2.xz) against run 1's
# build (.dev37/ts.xz, `old`, with TEXSTREAM_MATMUL_PACKED_OUT=1), Whisper-tiny and the
# BERT-base-shaped encoder, two rounds; then a sweep of the tensor-core MatMul's knobs on the
# BERT-base-shaped encoder (128 rows: TEXSTREAM_MATMUL_SPLIT_K, TEXSTREAM_COOP_ROWS,
# TEXSTREAM_COOP_STEP_K, TEXSTREAM_MATMUL_PACKED_A) and the attention's one pass; PyTorch's
# BERT baseline (scripts/encoder_baseline.py); and last the kernel_matmul test that timed out
# at 90 s in run 1 (constant_b_on_cooperative_matrices_where_available), given 200 s.
set -u
cd "$(dirname "$0")/../../.."
T0=$(date +%s); left() { echo $(( ${BUDGET:-400} - ($(date +%s) - T0) )); }
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
W=/tmp/d; mkdir -p /tmp/bin $W
xz -dc .dev37/ts.xz > /tmp/bin/old; xz -dc .dev37/ts2.xz > /tmp/bin/new; xz -dc .dev37/km.xz > /tmp/bin/km; chmod +x /tmp/bin/*
save() { tar czf $OUT/d.tgz -C $W .; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $W/gpu.txt 2>&1
timeout 100 $PY scripts/whisper_encoder_baseline.py /tmp/wenc --iters 5 > $W/torch_whisper.txt 2>&1
E=/tmp/enc; timeout 60 $PY scripts/make_scale_models.py $E --decoder 125m --reference > $W/gen_enc.txt 2>&1
inf() { local s=$1 b=$2; shift 2
  env TEXSTREAM_MATMUL_PACKED_OUT=1 timeout 60 /tmp/bin/$b infer "$@" --precision f16 --profile 3 -o /tmp/o-$s > $W/$s.txt 2>&1; echo "rc $?" >> $W/$s.txt; }
WH="/tmp/wenc/encoder.onnx --input input_features=/tmp/wenc/input.npy --repeat 20"
BE="$E/enc.onnx --input x=$E/features.npy --repeat 20"
inf warm new $WH; inf warm2 new $BE
for r in 1 2; do for b in old new; do inf whisper_${b}_$r $b $WH; inf bert_${b}_$r $b $BE; done; done; save
for k in TEXSTREAM_MATMUL_SPLIT_K=1 TEXSTREAM_MATMUL_SPLIT_K=2 TEXSTREAM_MATMUL_SPLIT_K=4 TEXSTREAM_MATMUL_SPLIT_K=8 \
         TEXSTREAM_COOP_ROWS=32 TEXSTREAM_COOP_ROWS=64 TEXSTREAM_COOP_STEP_K=64 TEXSTREAM_COOP_STEP_K=128 \
         TEXSTREAM_MATMUL_PACKED_A=0 TEXSTREAM_MATMUL_PACKED_A=1 TEXSTREAM_ATTENTION_ONE_PASS=1 TEXSTREAM_ATTENTION_ONE_PASS=0; do
  env $k timeout 60 /tmp/bin/new infer $BE --precision f16 --profile 3 > $W/knob_bert_$k.txt 2>&1
done; save
timeout 120 $PY scripts/encoder_baseline.py $E/enc.onnx $E/features.npy $W/torch_bert.json --iters 20 --texstream-output /tmp/o-bert_new_1/y.npy > $W/torch_bert.txt 2>&1; save
(cd vk-backend && timeout 200 /tmp/bin/km --test-threads 1 constant_b_on_cooperative > $W/kernel_matmul.txt 2>&1; echo "rc $?" >> $W/kernel_matmul.txt)
$PY - > $W/compare.txt 2>&1 <<'PY'
import glob, os, numpy as np
for m in ("whisper", "bert"):
    for f in sorted(glob.glob(f"/tmp/o-{m}_old_1/*.npy")):
        a, b = np.load(f), np.load(f.replace("_old_1", "_new_1"))
        print(m, "old new", os.path.basename(f), "max diff", float(np.abs(a - b).max()), "range", float(a.max() - a.min()))
PY
save
grep -E "test |test result|^rc" $W/kernel_matmul.txt; cat $W/compare.txt
grep -E "median|eager|graph" $W/torch_whisper.txt | head -6; cat $W/torch_bert.json 2>/dev/null | head -30; tail -3 $W/torch_bert.txt
for f in $(ls $W | grep -E '^(whisper|bert|knob)_' | sort); do
  echo "== $f $(grep -o 'GPU [0-9.]* ms' $W/$f | head -1) $(grep -hE '^(MatMul|Attention) ' $W/$f | head -2 | tr -s ' ' | tr '\n' ';') $(grep -hE '^rc [1-9]' $W/$f)"; done
