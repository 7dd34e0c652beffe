#!/usr/bin/env bash
# Session 37, run 9: the row-group LayerNorm addressing its texels by coordinates (coord_at: no
# divisions where the tensor is unfolded) instead of by linear index (fold_coord's three run-time
# divisions a load and a store): patches/layernorm_at.patch, compiled by
# `scripts/shader_variant.sh .dev37/sd/ln_at 'layernorm*rows*' PATCH` (and `ln_base` without it),
# on .dev37/ts4.xz (75c8357). Whisper-tiny's encoder, and the BERT-base-shaped encoder with its
# norms forced into row groups (TEXSTREAM_NORM_ROW_GROUPS=1), two rounds, outputs compared.
set -u
cd "$(dirname "$0")/../../.."
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
W=/tmp/d; mkdir -p /tmp/bin $W
xz -dc .dev37/ts4.xz > /tmp/bin/new; chmod +x /tmp/bin/*
save() { tar czf $OUT/d.tgz -C $W .; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $W/gpu.txt 2>&1
timeout 100 $PY scripts/whisper_encoder_baseline.py /tmp/wenc --iters 1 > $W/gen_whisper.txt 2>&1
E=/tmp/enc; timeout 60 $PY scripts/make_scale_models.py $E --decoder 125m --reference > $W/gen_enc.txt 2>&1
WH="/tmp/wenc/encoder.onnx --input input_features=/tmp/wenc/input.npy --repeat 20"
BE="$E/enc.onnx --input x=$E/features.npy --repeat 20"
inf() { local s=$1 v=$2; shift 2; env TEXSTREAM_SHADER_DIR=$PWD/.dev37/sd/$v timeout 60 /tmp/bin/new infer "$@" --precision f16 --profile 3 -o /tmp/o-$s > $W/$s.txt 2>&1; echo "rc $?" >> $W/$s.txt; }
inf warm ln_base $WH
for r in 1 2; do for v in ln_base ln_at; do inf whisper_${v}_$r $v $WH; TEXSTREAM_NORM_ROW_GROUPS=1 inf bert_${v}_$r $v $BE; done; done; save
$PY - > $W/compare.txt 2>&1 <<'PY'
import numpy as np
for m, f in (("whisper", "last_hidden_state.npy"), ("bert", "y.npy")):
    a, b = np.load(f"/tmp/o-{m}_ln_base_1/{f}"), np.load(f"/tmp/o-{m}_ln_at_1/{f}")
    print(m, "ln_base ln_at max diff", float(np.abs(a - b).max()))
PY
save; cat $W/compare.txt
for f in $(ls $W | grep -E '^(whisper|bert)_' | sort); do
  echo "== $f $(grep -o 'GPU [0-9.]* ms' $W/$f | head -1) $(grep -hE '^LayerNormalization ' $W/$f | tr -s ' ') $(grep -hE '^rc [1-9]' $W/$f)"; done
