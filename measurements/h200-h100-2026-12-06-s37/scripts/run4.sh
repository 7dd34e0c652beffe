#!/usr/bin/env bash
# Session 37, run 4: run 3's knob sweep again (run 3 left out -o, so every knob run failed),
# on the build at 1df2b72 (.dev37/ts2.xz): the BERT-base-shaped encoder under each of the
# tensor-core MatMul's knobs, the attention's one pass and the norms' row groups, and
# Whisper-tiny's encoder under the attention's splits, 32-row MatMul tiles and the norms' row
# groups; each beside a plain run of the same build, one round.
set -u
cd "$(dirname "$0")/../../.."
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
W=/tmp/d; mkdir -p /tmp/bin $W
xz -dc .dev37/ts2.xz > /tmp/bin/new; chmod +x /tmp/bin/*
save() { tar czf $OUT/d.tgz -C $W .; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $W/gpu.txt 2>&1
timeout 100 $PY scripts/whisper_encoder_baseline.py /tmp/wenc --iters 1 > $W/gen_whisper.txt 2>&1
E=/tmp/enc; timeout 60 $PY scripts/make_scale_models.py $E --decoder 125m --reference > $W/gen_enc.txt 2>&1
WH="/tmp/wenc/encoder.onnx --input input_features=/tmp/wenc/input.npy --repeat 20"
BE="$E/enc.onnx --input x=$E/features.npy --repeat 20"
knob() { local m=$1 k=$2; shift 2; env $k timeout 60 /tmp/bin/new infer "$@" --precision f16 --profile 3 -o /tmp/o-k > $W/knob_${m}_$k.txt 2>&1; }
knob bert X=warm $BE; knob whisper X=warm $WH
for k in X=plain TEXSTREAM_MATMUL_SPLIT_K=1 TEXSTREAM_MATMUL_SPLIT_K=2 TEXSTREAM_MATMUL_SPLIT_K=4 TEXSTREAM_MATMUL_SPLIT_K=8 \
         TEXSTREAM_COOP_ROWS=32 TEXSTREAM_COOP_ROWS=64 TEXSTREAM_COOP_STEP_K=64 TEXSTREAM_COOP_STEP_K=128 \
         TEXSTREAM_MATMUL_PACKED_A=0 TEXSTREAM_MATMUL_PACKED_A=1 TEXSTREAM_ATTENTION_ONE_PASS=1 TEXSTREAM_ATTENTION_ONE_PASS=0 \
         TEXSTREAM_NORM_ROW_GROUPS=1 TEXSTREAM_COOP_MIN_TILES=1 X=plain2; do knob bert $k $BE; done; save
for k in X=plain TEXSTREAM_ATTENTION_SPLITS=1 TEXSTREAM_ATTENTION_SPLITS=3 TEXSTREAM_ATTENTION_SPLITS=4 TEXSTREAM_ATTENTION_SPLITS=8 \
         TEXSTREAM_COOP_ROWS=32 TEXSTREAM_NORM_ROW_GROUPS=0 TEXSTREAM_MATMUL_SPLIT_K=2 X=plain2; do knob whisper $k $WH; done; save
for f in $(ls $W | grep -E '^knob_' ); do
  echo "== $f $(grep -o 'GPU [0-9.]* ms' $W/$f | head -1) $(grep -hE '^(MatMul|Attention|LayerNormalization) ' $W/$f | head -3 | tr -s ' ' | tr '\n' ';') $(grep -ciE 'error' $W/$f)"; done
