#!/usr/bin/env bash
# Session 37, run 8: the session's end state (.dev37/ts4.xz, 75c8357) against its start
# (.dev37/ts.xz, c132229) on one card, Whisper-tiny's encoder and the BERT-base-shaped encoder,
# two rounds after a warm-up of each binary, outputs against ONNX Runtime; PyTorch fp16 (eager
# and CUDA graph) on the same card.
set -u
cd "$(dirname "$0")/../../.."
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
W=/tmp/d; mkdir -p /tmp/bin $W
xz -dc .dev37/ts.xz > /tmp/bin/old; xz -dc .dev37/ts4.xz > /tmp/bin/new; chmod +x /tmp/bin/*
save() { tar czf $OUT/d.tgz -C $W .; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $W/gpu.txt 2>&1
timeout 100 $PY scripts/whisper_encoder_baseline.py /tmp/wenc --iters 10 > $W/torch_whisper.txt 2>&1
E=/tmp/enc; timeout 60 $PY scripts/make_scale_models.py $E --decoder 125m --reference > $W/gen_enc.txt 2>&1
WH="/tmp/wenc/encoder.onnx --input input_features=/tmp/wenc/input.npy --repeat 20"
BE="$E/enc.onnx --input x=$E/features.npy --repeat 20"
inf() { local s=$1 b=$2; shift 2; timeout 60 /tmp/bin/$b infer "$@" --precision f16 --profile 3 -o /tmp/o-$s > $W/$s.txt 2>&1; echo "rc $?" >> $W/$s.txt; }
for b in old new; do inf warm_w_$b $b $WH; inf warm_b_$b $b $BE; done
for r in 1 2; do for b in old new; do inf whisper_${b}_$r $b $WH; inf bert_${b}_$r $b $BE; done; done; save
timeout 120 $PY scripts/encoder_baseline.py $E/enc.onnx $E/features.npy $W/torch_bert.json --iters 20 --texstream-output /tmp/o-bert_new_1/y.npy > $W/torch_bert.txt 2>&1
$PY - > $W/compare.txt 2>&1 <<'PY'
import numpy as np
ref = np.load("/tmp/wenc/ort.npy").reshape(-1)
for b in ("old", "new"):
    a = np.load(f"/tmp/o-whisper_{b}_1/last_hidden_state.npy").reshape(-1)
    print("whisper", b, "vs ORT max diff", float(np.abs(a - ref).max()), "range", float(ref.max() - ref.min()))
PY
save; cat $W/compare.txt; grep -E '"ms_median"|texstream_vs_ort' $W/torch_whisper.txt $W/torch_bert.json
for f in $(ls $W | grep -E '^(whisper|bert)_' | sort); do
  echo "== $f $(grep -o 'GPU [0-9.]* ms' $W/$f | head -1) $(grep -hE '^(MatMul|Attention|LayerNormalization|Binary) ' $W/$f | tr -s ' ' | tr '\n' ';') $(grep -hE '^rc [1-9]' $W/$f)"; done
