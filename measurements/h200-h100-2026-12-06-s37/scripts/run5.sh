#!/usr/bin/env bash
# Session 37, run 5: the wide attention with three query blocks a head lane
# (attention_coop_wide3*.comp, picked by shape: .dev37/ts3.xz) against four
# (TEXSTREAM_ATTENTION_QUERY_BLOCKS=4, the same binary) on Whisper-tiny's encoder, two rounds,
# outputs compared; the BERT-base-shaped encoder (not wide) as a check; and PyTorch's Whisper
# baseline on the same card.
set -u
cd "$(dirname "$0")/../../.."
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
W=/tmp/d; mkdir -p /tmp/bin $W
xz -dc .dev37/ts3.xz > /tmp/bin/new; chmod +x /tmp/bin/*
save() { tar czf $OUT/d.tgz -C $W .; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $W/gpu.txt 2>&1
timeout 100 $PY scripts/whisper_encoder_baseline.py /tmp/wenc --iters 5 > $W/torch_whisper.txt 2>&1
E=/tmp/enc; timeout 60 $PY scripts/make_scale_models.py $E --decoder 125m --reference > $W/gen_enc.txt 2>&1
WH="/tmp/wenc/encoder.onnx --input input_features=/tmp/wenc/input.npy --repeat 20"
BE="$E/enc.onnx --input x=$E/features.npy --repeat 20"
inf() { local s=$1 k=$2; shift 2; env $k timeout 60 /tmp/bin/new infer "$@" --precision f16 --profile 3 -o /tmp/o-$s > $W/$s.txt 2>&1; echo "rc $?" >> $W/$s.txt; }
inf warm X=1 $WH
for r in 1 2; do inf whisper_qb3_$r X=1 $WH; inf whisper_qb4_$r TEXSTREAM_ATTENTION_QUERY_BLOCKS=4 $WH; done
inf bert_1 X=1 $BE; save
$PY - > $W/compare.txt 2>&1 <<'PY'
import numpy as np
a, b = np.load("/tmp/o-whisper_qb4_1/last_hidden_state.npy"), np.load("/tmp/o-whisper_qb3_1/last_hidden_state.npy")
print("whisper qb4 qb3 max diff", float(np.abs(a - b).max()), "range", float(a.max() - a.min()))
PY
save; cat $W/compare.txt; grep -E '"ms_median"' $W/torch_whisper.txt
for f in $(ls $W | grep -E '^(whisper|bert)_' | sort); do
  echo "== $f $(grep -o 'GPU [0-9.]* ms' $W/$f | head -1) $(grep -hE '^(MatMul|Attention) ' $W/$f | head -2 | tr -s ' ' | tr '\n' ';') $(grep -hE '^rc [1-9]' $W/$f)"; done
