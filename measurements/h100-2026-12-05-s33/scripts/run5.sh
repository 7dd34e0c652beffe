#!/usr/bin/env bash
# Session 33, run 5 (.devbin6/: texstream at 4b79afb, every default of this session: dense
# readback, the large convolution tile by shape): every row this session touched with its
# defaults, PyTorch fp16 on the same card beside each (CUDA graph and eager), and the
# tensor-core attention's key spans swept (TEXSTREAM_ATTENTION_SPLITS) on the Whisper-tiny
# encoder, BERT-base-shaped encoder and the 1.34 B prefill. `texstream infer MODEL --precision
# f16 --repeat 20 --profile 3` (prefill --repeat 10), resident.
set -u
cd "$(dirname "$0")/../../.."
T0=$(date +%s)
left() { echo $(( 575 - ($(date +%s) - T0) )); }
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
W=/tmp/d7; mkdir -p /tmp/bin $W /tmp/tv
xz -dc .devbin6/ts.xz > /tmp/bin/ts; chmod +x /tmp/bin/*
xz -dc .devbin5/det.onnx.xz > /tmp/det.onnx
save() { tar czf $OUT/d.tgz -C $W .; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $W/gpu.txt 2>&1
(timeout 170 $PY scripts/make_scale_models.py models/scale --decoder 1.3b > $W/gen.txt 2>&1; echo "rc $?" >> $W/gen.txt) &
GEN=$!
(timeout 100 $PY scripts/whisper_encoder_baseline.py /tmp/wenc > $W/torch_whisper.txt 2>&1) &
TW=$!
E=/tmp/enc; (timeout 60 $PY scripts/make_scale_models.py $E --decoder 125m --reference > $W/gen_enc.txt 2>&1) &
GE=$!
(timeout 150 $PY scripts/kernel_baseline.py /tmp/tv --models resnet50 --iters 50 > $W/torch_resnet.txt 2>&1; cp /tmp/tv/torch.json $W/torch_resnet.json) &
TR=$!
$PY -c "import numpy as np; np.save('/tmp/det.input.npy', np.random.default_rng(0).uniform(-1, 1, [1, 3, 384, 768]).astype(np.float32))"
inf() { # file-stem env model args...
  local s=$1 e=$2; shift 2
  env $e timeout 60 /tmp/bin/ts infer "$@" --precision f16 --profile 3 -o /tmp/o7-$s > $W/$s.txt 2>&1; echo "rc $?" >> $W/$s.txt
}
inf det X=1 /tmp/det.onnx --input x=/tmp/det.input.npy --repeat 30
inf det X=1 /tmp/det.onnx --input x=/tmp/det.input.npy --repeat 20
wait $TW
WH="/tmp/wenc/encoder.onnx --input input_features=/tmp/wenc/input.npy --repeat 20"
for sp in def 1 2 3 4 def2; do
  e=X=1; case $sp in def*) ;; *) e=TEXSTREAM_ATTENTION_SPLITS=$sp;; esac
  inf whisper_$sp $e $WH
done
save
wait $TR
inf resnet50 X=1 /tmp/tv/resnet50.onnx --input input=/tmp/tv/resnet50.input.npy --repeat 20
wait $GE
(timeout 100 $PY scripts/encoder_baseline.py $E/enc.onnx $E/features.npy $W/torch_bert.json --iters 30 > $W/torch_bert.txt 2>&1) &
TB=$!
BE="$E/enc.onnx --input x=$E/features.npy --repeat 20"
for sp in def 2 8 def2; do
  e=X=1; case $sp in def*) ;; *) e=TEXSTREAM_ATTENTION_SPLITS=$sp;; esac
  inf bert_$sp $e $BE
done
save
wait $TB
wait $GEN
timeout 100 /tmp/bin/ts compile models/scale/lm/decoder.onnx -o /tmp/prefill.tspk --kv-cache 128 \
  --shape input_ids=1x128 --shape position_ids=1x128 --shape attention_mask=1x128 \
  > $W/prefill-compile.txt 2>&1; echo "rc $?" >> $W/prefill-compile.txt
timeout 60 /tmp/bin/ts check workloads/assistant-scale.ron > $W/check-scale.txt 2>&1; echo "rc $?" >> $W/check-scale.txt
for sp in def 2 3 def2; do
  [ $(left) -gt 200 ] || break
  e=X=1; case $sp in def*) ;; *) e=TEXSTREAM_ATTENTION_SPLITS=$sp;; esac
  inf prefill_$sp $e /tmp/prefill.tspk --fill-missing 1 --repeat 10
done
[ $(left) -gt 170 ] && inf decode X=1 models/scale/lm/decoder.tspk --fill-missing 1 --repeat 20
save
if [ $(left) -gt 110 ]; then
  timeout $(( $(left) - 15 )) $PY scripts/torch_baseline.py $W/torch_lm13.json --smollm2 models/scale/lm \
    --no-whisper --no-compile --iters 10 --decode-steps 32 --lm-steps 16 > $W/torch_lm13.txt 2>&1
  echo "torch_baseline: rc $?" >> $W/torch_lm13.txt
  save
fi
for f in det whisper_def whisper_1 whisper_2 whisper_3 whisper_4 whisper_def2 resnet50 bert_def bert_2 bert_8 bert_def2 prefill_def prefill_2 prefill_3 prefill_def2 decode; do
  [ -e $W/$f.txt ] || continue; echo "== $f"; grep -hE "repeat runs|^Attention |^Conv " $W/$f.txt; done
grep -hE "ms_median" -B1 $W/torch_whisper.txt | head -6; cat $W/torch_resnet.json 2>/dev/null | head -8; grep -E "graph|eager" $W/torch_bert.txt | head -4; grep -E "ms|rc" $W/torch_lm13.txt | tail -8
echo "elapsed $(( $(date +%s) - T0 )) s"
