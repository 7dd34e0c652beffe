#!/usr/bin/env bash
# Session 39, run 2: where the Whisper-tiny encoder's attention (attention_coop_wide3_1p_split)
# spends its time: the same binary (.dev39/ts1.xz) with its SPIR-V replaced by ablated variants
# (patches/attention_ablate.patch: no key staging, no score product, no exp, no P V product,
# none of them; wrong values, times only), and with its keys split over 1, 3, 4 and 6 spans
# (TEXSTREAM_ATTENTION_SPLITS); then the OCR detector and classifier beside PyTorch through
# onnx2torch (scripts/onnx_torch_baseline.py, normalized files).
set -u
cd "$(dirname "$0")/../../.."
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
W=/tmp/s39r2; mkdir -p /tmp/s39bin $W /tmp/s39o2t
xz -dc .dev39/ts1.xz > /tmp/s39bin/ts; chmod +x /tmp/s39bin/*
for m in det cls; do [ -f /tmp/s39$m.onnx ] || xz -dc .dev39/$m.onnx.xz > /tmp/s39$m.onnx; done
[ -d /tmp/s39o2t/onnx2torch ] || $PY -m pip install --no-deps --no-index --target /tmp/s39o2t .dev39/wheels/onnx2torch-*.whl > $W/pip.txt 2>&1
save() { tar czf $OUT/d.tgz -C $W .; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $W/gpu.txt 2>&1
[ -f /tmp/s39wenc/encoder.onnx ] || timeout 100 $PY scripts/whisper_encoder_baseline.py /tmp/s39wenc --iters 5 > $W/torch_whisper.txt 2>&1
inf() { local s=$1; shift; timeout 60 /tmp/s39bin/ts infer "$@" --precision f16 --repeat 20 --profile 3 -o /tmp/s39o2-$s > $W/$s.txt 2>&1; echo "rc $?" >> $W/$s.txt; }
wh() { inf "$@" /tmp/s39wenc/encoder.onnx --input input_features=/tmp/s39wenc/input.npy; }
wh warm
for r in 1 2; do
  wh built_$r
  for v in STAGE SCORE EXP PV all; do TEXSTREAM_SHADER_DIR=$PWD/.dev39/spv/no_$v wh no_${v}_$r; done
  for s in 1 3 4 6; do TEXSTREAM_ATTENTION_SPLITS=$s wh splits${s}_$r; done
done
save
for m in det:1,3,384,768 cls:1,3,48,192; do n=${m%%:*}; s=${m#*:}
  PYTHONPATH=/tmp/s39o2t timeout 150 $PY scripts/onnx_torch_baseline.py /tmp/s39$n.onnx $W/torch_$n.json --shape $s --save-input /tmp/s39$n.input.npy --compile > $W/torch_$n.txt 2>&1
  tail -25 $W/torch_$n.txt
done
save
for f in $(ls $W | grep -E '_(1|2).txt$' | sort); do
  echo "== $f $(grep -o 'GPU [0-9.]* ms' $W/$f | head -1) $(grep -E '^Attention ' $W/$f) $(grep -hE '^rc [1-9]' $W/$f)"; done
