#!/usr/bin/env bash
# Session 39, run 6: DenseNet-121's small convolutions (3x3 to 32 channels at 56x56 .. 7x7, about
# 25 us each for a few MFLOP) under every reduction split (TEXSTREAM_CONV_SPLIT_K=1, 2, 4, 8 on
# the small and wide tiles) and tile (TEXSTREAM_COOP_CONV_TILE), against the rule by shape; the
# session's build (.dev39/ts4.xz). Per-shape times from the profile.
set -u
cd "$(dirname "$0")/../../.."
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
W=/tmp/s39r6; T=/tmp/s39tv6; mkdir -p /tmp/s39bin $W $T
xz -dc .dev39/ts4.xz > /tmp/s39bin/ts4; chmod +x /tmp/s39bin/*
save() { tar czf $OUT/d.tgz -C $W .; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $W/gpu.txt 2>&1
timeout 120 $PY scripts/kernel_baseline.py $T --models densenet121,resnet50 --iters 10 > $W/torch_tv.txt 2>&1
inf() { local s=$1; shift; timeout 60 /tmp/s39bin/ts4 infer "$@" --precision f16 --repeat 20 --profile 3 -o /tmp/s39o6-$s > $W/$s.txt 2>&1; echo "rc $?" >> $W/$s.txt; }
dn() { inf "$@" $T/densenet121.onnx --input input=$T/densenet121.input.npy; }
dn warm
for r in 1 2; do
  dn shape_$r
  for s in 1 2 4 8; do TEXSTREAM_CONV_SPLIT_K=$s dn split${s}_$r; done
  for t in Small Wide Large; do TEXSTREAM_COOP_CONV_TILE=$t dn tile${t}_$r; done
done
save
for f in $(ls $W | grep -E '_(1|2).txt$' | sort); do
  echo "== $f $(grep -o 'GPU [0-9.]* ms' $W/$f | head -1) $(grep -E '^(Conv|Concat) ' $W/$f | tr -s ' ' | tr '\n' ' ') $(grep -hE '^rc [1-9]' $W/$f)"
  grep -E '^  Conv .*-> \[1, 32, (56|28|14|7), ' $W/$f | tr -s ' ' | sed 's/^/    /'
done
