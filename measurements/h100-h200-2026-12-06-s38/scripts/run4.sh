#!/usr/bin/env bash
# Session 38, run 4: the split attention's packed merge taking four heads an invocation (a
# packed texel for each; .dev38/final2.xz, otherwise run 3's build) against 3157ceb
# (.dev38/base.xz): the Whisper-tiny encoder and the BERT-base-shaped encoder, a warm-up of
# each binary and two rounds, outputs against the base and ONNX Runtime; kernel_attention.
set -u
cd "$(dirname "$0")/../../.."
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
W=/tmp/d; mkdir -p /tmp/bin $W
for b in base final2 t_attention; do xz -dc .dev38/$b.xz > /tmp/bin/$b; done; chmod +x /tmp/bin/*
save() { tar czf $OUT/d.tgz -C $W .; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $W/gpu.txt 2>&1
( timeout 200 /tmp/bin/t_attention --test-threads 1 > $W/t_attention.txt 2>&1; echo "rc $?" >> $W/t_attention.txt ) &
timeout 100 $PY scripts/whisper_encoder_baseline.py /tmp/wenc --iters 10 > $W/torch_whisper.txt 2>&1
E=/tmp/enc; timeout 60 $PY scripts/make_scale_models.py $E --decoder 125m --reference > $W/gen_enc.txt 2>&1
wait
WH="/tmp/wenc/encoder.onnx --input input_features=/tmp/wenc/input.npy --repeat 20"
BE="$E/enc.onnx --input x=$E/features.npy --repeat 20"
inf() { local s=$1 b=$2; shift 2; timeout 60 /tmp/bin/$b infer "$@" --precision f16 --profile 3 -o /tmp/o-$s > $W/$s.txt 2>&1; echo "rc $?" >> $W/$s.txt; }
for b in base final2; do inf warm_w_$b $b $WH; inf warm_b_$b $b $BE; done
for r in 1 2; do
  for b in base final2; do inf whisper_${b}_$r $b $WH; inf bert_${b}_$r $b $BE; done
  TEXSTREAM_ATTENTION_PACKED_OUT=0 inf bert_noattn_$r final2 $BE
  TEXSTREAM_ATTENTION_PACKED_OUT=0 inf whisper_noattn_$r final2 $WH
done; save
timeout 120 $PY scripts/encoder_baseline.py $E/enc.onnx $E/features.npy $W/torch_bert.json --iters 20 --texstream-output /tmp/o-bert_final2_1/y.npy > $W/torch_bert.txt 2>&1
$PY - > $W/compare.txt 2>&1 <<'PY'
import numpy as np
ref = np.load("/tmp/wenc/ort.npy").reshape(-1)
b = np.load("/tmp/o-whisper_base_1/last_hidden_state.npy").reshape(-1)
for s in ("base_1", "final2_1", "noattn_1"):
    a = np.load(f"/tmp/o-whisper_{s}/last_hidden_state.npy").reshape(-1)
    print("whisper", s, "vs ORT max diff", float(np.abs(a - ref).max()), "range", float(ref.max() - ref.min()), "vs base", float(np.abs(a - b).max()))
for s in ("final2_1", "noattn_1"):
    a, c = np.load(f"/tmp/o-bert_{s}/y.npy"), np.load("/tmp/o-bert_base_1/y.npy")
    print("bert", s, "vs base", float(np.abs(a - c).max()))
PY
save; cat $W/compare.txt; grep -E '"ms_median"|texstream_vs_ort' $W/torch_whisper.txt $W/torch_bert.json
grep -hE "^test result|FAILED|panicked|^rc" $W/t_*.txt
for f in $(ls $W | grep -E '^(whisper|bert)_' | sort); do
  echo "== $f $(grep -o 'GPU [0-9.]* ms' $W/$f | head -1) $(grep -o 'replayed commands: [0-9]* dispatches' $W/$f) $(grep -hE '^(MatMul|Attention|LayerNormalization|Conv) ' $W/$f | tr -s ' ' | tr '\n' ';') $(grep -hE '^rc [1-9]' $W/$f)"; done
