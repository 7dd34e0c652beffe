#!/usr/bin/env bash
# Session 37, run 2: the tensor-core attention's variants from patches/attention_variants.patch
# (.dev37/sd/<v>, scripts/shader_variant.sh .dev37/sd/<v> 'attention_coop*' PATCH -- DEFINES):
#   base  the patch with no define (as HEAD)
#   sgb   -DATT_SGB: a subgroup's own score and P rows synchronised by subgroup barriers, not
#         workgroup barriers (two workgroup barriers a key block instead of four)
#   rot   -DATT_ROT: each invocation walks its eight keys rotated by its row, so the score reads
#         and the P stores spread over the shared-memory banks (8-way conflicts to 2-way)
#   kvl   -DATT_KVL: the wide kernel issues its key and value loads before any store
#   all3  all three
# on Whisper-tiny's encoder (wide one-pass, split in 2) and the BERT-base-shaped encoder
# (128 rows: the narrow kernel), with TEXSTREAM_MATMUL_PACKED_OUT=1, two rounds.
set -u
cd "$(dirname "$0")/../../.."
T0=$(date +%s); left() { echo $(( ${BUDGET:-300} - ($(date +%s) - T0) )); }
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json TEXSTREAM_MATMUL_PACKED_OUT=1
PY=/opt/torch/.venv/bin/python3
W=/tmp/d; mkdir -p /tmp/bin $W
xz -dc .dev37/ts.xz > /tmp/bin/ts; chmod +x /tmp/bin/*
save() { tar czf $OUT/d.tgz -C $W .; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $W/gpu.txt 2>&1
timeout 100 $PY scripts/whisper_encoder_baseline.py /tmp/wenc --iters 1 > $W/gen_whisper.txt 2>&1
E=/tmp/enc; timeout 60 $PY scripts/make_scale_models.py $E --decoder 125m --reference > $W/gen_enc.txt 2>&1
inf() { local s=$1 v=$2; shift 2
  env TEXSTREAM_SHADER_DIR=$PWD/.dev37/sd/$v timeout 60 /tmp/bin/ts infer "$@" --precision f16 --profile 3 -o /tmp/o-$s > $W/$s.txt 2>&1; echo "rc $?" >> $W/$s.txt; }
WH="/tmp/wenc/encoder.onnx --input input_features=/tmp/wenc/input.npy --repeat 20"
BE="$E/enc.onnx --input x=$E/features.npy --repeat 20"
inf warm base $WH; inf warm2 base $BE
for r in 1 2; do
  for v in base sgb rot kvl all3; do inf whisper_${v}_$r $v $WH; inf bert_${v}_$r $v $BE; done; save
  [ $(left) -gt 70 ] || break
done
$PY - > $W/compare.txt 2>&1 <<'PY'
import glob, os, numpy as np
for m in ("whisper", "bert"):
    for y in ("sgb", "rot", "kvl", "all3"):
        for f in sorted(glob.glob(f"/tmp/o-{m}_base_1/*.npy")):
            g = f.replace("_base_1", f"_{y}_1")
            if os.path.exists(g):
                a, b = np.load(f), np.load(g)
                print(m, "base", y, os.path.basename(f), "max diff", float(np.abs(a - b).max()), "range", float(a.max() - a.min()))
PY
save
cat $W/compare.txt
for f in $(ls $W | grep -E '^(whisper|bert)_' | sort); do
  echo "== $f $(grep -o 'GPU [0-9.]* ms' $W/$f | head -1) $(grep -hE '^Attention ' $W/$f | head -1) $(grep -hE '^rc [1-9]' $W/$f)"; done
