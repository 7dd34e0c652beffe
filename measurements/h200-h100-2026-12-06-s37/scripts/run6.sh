#!/usr/bin/env bash
# Session 37, run 6: what the attention's head copies cost, apart from the kernel. Whisper-tiny's
# encoder on .dev37/ts3.xz with four query blocks (TEXSTREAM_ATTENTION_QUERY_BLOCKS=4, so that
# the wide one-pass kernels of .dev37/sd/abl_* apply), with and without the head copies
# (TEXSTREAM_ATTENTION_HEAD_COPIES=1), each on abl_NONE (the kernel as at c132229) and
# abl_NOLOAD (no key/value loads: wrong outputs by design), two rounds. Without loads the kernel
# does the same work whatever the operands' layout, so copies+NOLOAD minus NOLOAD is the copies.
set -u
cd "$(dirname "$0")/../../.."
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json TEXSTREAM_ATTENTION_QUERY_BLOCKS=4
PY=/opt/torch/.venv/bin/python3
W=/tmp/d; mkdir -p /tmp/bin $W
xz -dc .dev37/ts3.xz > /tmp/bin/new; chmod +x /tmp/bin/*
save() { tar czf $OUT/d.tgz -C $W .; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $W/gpu.txt 2>&1
timeout 100 $PY scripts/whisper_encoder_baseline.py /tmp/wenc --iters 1 > $W/gen_whisper.txt 2>&1
WH="/tmp/wenc/encoder.onnx --input input_features=/tmp/wenc/input.npy --repeat 20"
inf() { local s=$1 c=$2 a=$3; env TEXSTREAM_ATTENTION_HEAD_COPIES=$c TEXSTREAM_SHADER_DIR=$PWD/.dev37/sd/abl_$a timeout 60 /tmp/bin/new infer $WH --precision f16 --profile 3 -o /tmp/o-$s > $W/$s.txt 2>&1; echo "rc $?" >> $W/$s.txt; }
inf warm 0 NONE
for r in 1 2; do for c in 0 1; do for a in NONE NOLOAD; do inf whisper_copies${c}_${a}_$r $c $a; done; done; done; save
for f in $(ls $W | grep -E '^whisper_' | sort); do
  echo "== $f $(grep -o 'GPU [0-9.]* ms' $W/$f | head -1) $(grep -hE '^Attention ' $W/$f | head -1 | tr -s ' ') $(grep -hE '^rc [1-9]' $W/$f)"; done
