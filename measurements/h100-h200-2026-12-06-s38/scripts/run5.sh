#!/usr/bin/env bash
# Session 38, run 5: one tensor-core MatMul (a linear layer, scripts/matmul_models.py) over K
# from 64 to 1536 at Whisper-tiny's [1500 x K] x [K x 384] and BERT-base's [128 x K] x
# [K x 768], .dev38/final2.xz: the MatMul's time against K, its fixed part and its part a step.
set -u
cd "$(dirname "$0")/../../.."
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
W=/tmp/d; mkdir -p /tmp/bin $W
xz -dc .dev38/final2.xz > /tmp/bin/ts; chmod +x /tmp/bin/ts
save() { tar czf $OUT/d.tgz -C $W .; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $W/gpu.txt 2>&1
$PY measurements/h100-h200-2026-12-06-s38/scripts/matmul_models.py /tmp/mm > $W/gen.txt 2>&1
inf() { local s=$1; shift; timeout 60 /tmp/bin/ts infer "$@" --precision f16 --repeat 20 --profile 3 -o /tmp/o-$s > $W/$s.txt 2>&1; echo "rc $?" >> $W/$s.txt; }
inf warm /tmp/mm/mm_1500_384_384.onnx --input x=/tmp/mm/x_1500_384.npy
for r in 1 2; do for mn in 1500_384 128_768; do for k in 64 128 256 384 768 1536; do
  m=${mn%_*}; inf mm_${mn}_${k}_$r /tmp/mm/mm_${mn}_${k}.onnx --input x=/tmp/mm/x_${m}_${k}.npy
done; done; done; save
for f in $(ls $W | grep -E '^mm_' | sort -V); do
  echo "== $f $(grep -o 'GPU [0-9.]* ms' $W/$f | head -1) $(grep -o 'replayed commands: [0-9]* dispatches' $W/$f) $(grep -hE '^[A-Z][A-Za-z]+ +[0-9]+ ' $W/$f | tr -s ' ' | tr '\n' ';') $(grep -hE '^rc [1-9]' $W/$f)"; done
