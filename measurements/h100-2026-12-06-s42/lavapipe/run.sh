#!/usr/bin/env bash
# Session 42, lavapipe (this CPU machine, 2 cores): the OCR models under ncnn's Vulkan backend
# (the ncnn wheel on pnnx conversions, scripts/ncnn_baseline.py) and texstream, the build before
# this session (BASE, 8991c6a) and after (NEW, ec59863), alternating, two rounds, the same
# inputs. (Session 40's script, its output directories renamed.)
#   BASE=... NEW=... run.sh OUTDIR   (after `ncnn_baseline.py convert /tmp/nc cls=...:1x3x48x192
#   det=...:1x3x256x256 rec=...:1x3x48x320`)
set -u
cd "$(dirname "$0")/../../.."
O=$1; mkdir -p $O
for r in 1 2; do
  .venv/bin/python scripts/ncnn_baseline.py run /tmp/nc --iters 5 --reference > $O/ncnn_$r.txt 2>&1
  for b in BASE NEW; do
    for m in cls det rec; do
      ${!b} infer models/ocr/$m.onnx --input x=/tmp/nc/$m.input.npy --precision f16 --repeat 5 --profile 3 -o /tmp/lp42_${b}_$m > $O/${m}_${b}_$r.txt 2>&1
    done
  done
done
for f in $O/*.txt; do echo "== $(basename $f) $(grep -E 'repeat runs' $f | sed 's/(replayed.*GPU/GPU/')"; done
