#!/usr/bin/env bash
# H200 session 15: workloads/assistant-scale.ron (a BERT-base-shaped encoder -> a 1.34 B decoder,
# 8 prompt + 16 greedy tokens -> a small encoder; 2771 pages of 1 MiB) under every policy at
# caps of 1/2, 1/4 and 1/8 of its weights, and PyTorch fp16 on the same decoder.
#   [SIZE=1.3b|2.7b] [TORCH=1] [ITER=N] [RUNFLAGS=...] scale.sh CAPS...
#   e.g. TORCH=1 scale.sh;  scale.sh 1386MiB 693MiB;  ITER=5 RUNFLAGS=--cold scale.sh 693MiB
# Each call generates the models on the device (scripts/make_scale_models.py, numpy + onnx
# only; about 30 s) into models/scale unless they are there, compiles them (`texstream check`,
# about 17 s), with TORCH=1 runs scripts/torch_baseline.py on the decoder (PyTorch fp16, eager
# and CUDA graph, decode and 128-token prefill), then `texstream run --all-policies
# --resident-reference --iterations ${ITER:-3} $RUNFLAGS` per cap.
# Carries .gl and .devbin/texstream.xz. Outputs: $OUT/s.tgz.
set -u
cd "$(dirname "$0")/../../.."
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
W=/tmp/w; rm -rf $W; mkdir -p /tmp/bin $W
xz -dc .devbin/texstream.xz > /tmp/bin/texstream && chmod +x /tmp/bin/texstream
nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv > $W/gpu.txt
if [ "$(cat models/scale/size 2>/dev/null)" != "${SIZE:-1.3b}" ]; then
  rm -rf models/scale
  S=$(date +%s%3N)
  $PY scripts/make_scale_models.py models/scale --decoder ${SIZE:-1.3b} > $W/gen.txt 2>&1
  echo "generate: rc $? in $(( $(date +%s%3N) - S )) ms" >> $W/gen.txt
  echo "${SIZE:-1.3b}" > models/scale/size
fi
S=$(date +%s%3N)
/tmp/bin/texstream check workloads/assistant-scale.ron > $W/check.txt 2>&1
echo "check (compile): rc $? in $(( $(date +%s%3N) - S )) ms" >> $W/check.txt
if [ "${TORCH:-0}" = 1 ]; then
  timeout 240 $PY scripts/torch_baseline.py $W/torch_lm13.json --smollm2 models/scale/lm \
    --no-whisper --no-compile --iters 10 --decode-steps 32 --lm-steps 16 > $W/torch_lm13.txt 2>&1
  echo "torch_baseline: rc $?" >> $W/torch_lm13.txt
fi
for cap in "$@"; do
  S=$(date +%s%3N)
  timeout 250 /tmp/bin/texstream run workloads/assistant-scale.ron --all-policies --cap $cap \
    --iterations ${ITER:-3} ${RUNFLAGS:-} --resident-reference --metrics-json $W/scale-$cap.json \
    --residency-svg $W/scale-$cap.svg > $W/scale-$cap.txt 2>&1
  echo "rc $? in $(( $(date +%s%3N) - S )) ms" >> $W/scale-$cap.txt
done
tar czf $OUT/s.tgz -C $W .
cat $W/gen.txt $W/check.txt 2>/dev/null | grep -E "total|decoder|rc|model \`" 
tail -3 $W/torch_lm13.txt 2>/dev/null
for cap in "$@"; do grep -A8 "^policy " $W/scale-$cap.txt; grep -A7 "^cold start  " $W/scale-$cap.txt; tail -1 $W/scale-$cap.txt; done
