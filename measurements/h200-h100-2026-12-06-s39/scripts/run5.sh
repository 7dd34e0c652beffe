#!/usr/bin/env bash
# Session 39, run 3: key and value projections written packed for the tensor-core attention
# (.dev39/ts4.xz, default) against the same binary with TEXSTREAM_ATTENTION_PACKED_KV=0, on the
# Whisper-tiny encoder and the BERT-base-shaped encoder, alternating; kernel_attention (its
# packed K/V case on the tensor cores); the OCR detector and classifier beside PyTorch through
# onnx2torch (scripts/onnx_torch_baseline.py with its shape folding). `run4.sh a`: the A/B,
# kernel_attention and the encoders beside PyTorch (eager, CUDA graph, torch.compile);
# `run4.sh b`: the CNN and OCR rows beside PyTorch.
set -u
part=${1:-a}
cd "$(dirname "$0")/../../.."
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
W=/tmp/s39r5$part; mkdir -p /tmp/s39bin $W /tmp/s39o2t
xz -dc .dev39/ts4.xz > /tmp/s39bin/ts4; chmod +x /tmp/s39bin/*
for m in det cls; do [ -f /tmp/s39$m.onnx ] || xz -dc .dev39/$m.onnx.xz > /tmp/s39$m.onnx; done
[ -d /tmp/s39o2t/onnx2torch ] || $PY -m pip install --no-deps --no-index --target /tmp/s39o2t .dev39/wheels/onnx2torch-*.whl > $W/pip.txt 2>&1
save() { tar czf $OUT/d.tgz -C $W .; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $W/gpu.txt 2>&1
[ -f /tmp/s39wenc/encoder.onnx ] || timeout 100 $PY scripts/whisper_encoder_baseline.py /tmp/s39wenc --iters 5 > $W/torch_whisper.txt 2>&1
E=/tmp/s39enc; [ -f $E/enc.onnx ] || timeout 60 $PY scripts/make_scale_models.py $E --decoder 125m --reference > $W/gen_enc.txt 2>&1
inf() { local s=$1; shift; timeout 60 /tmp/s39bin/ts4 infer "$@" --precision f16 --repeat 20 --profile 3 -o /tmp/s39o5-$s > $W/$s.txt 2>&1; echo "rc $?" >> $W/$s.txt; }
if [ "$part" = a ]; then
inf() { local s=$1; shift; timeout 60 /tmp/s39bin/ts4 infer "$@" --precision f16 --repeat 20 --profile 3 -o /tmp/s39o5-$s > $W/$s.txt 2>&1; echo "rc $?" >> $W/$s.txt; }
for r in warm 1 2; do
  inf whisper_packed_$r /tmp/s39wenc/encoder.onnx --input input_features=/tmp/s39wenc/input.npy
  TEXSTREAM_ATTENTION_PACKED_KV=0 inf whisper_rows_$r /tmp/s39wenc/encoder.onnx --input input_features=/tmp/s39wenc/input.npy
  inf bert_packed_$r $E/enc.onnx --input x=$E/features.npy
  TEXSTREAM_ATTENTION_PACKED_KV=0 inf bert_rows_$r $E/enc.onnx --input x=$E/features.npy
done
save
timeout 200 /tmp/s39bin/ka3 --test-threads=4 > $W/kernel_attention.txt 2>&1; echo "rc $?" >> $W/kernel_attention.txt
$PY - > $W/compare.txt 2>&1 <<'PY'
import numpy as np, onnxruntime as ort
ref = np.load("/tmp/s39wenc/ort.npy").reshape(-1)
out = {}
for v in ("packed", "rows"):
    out[v] = a = np.load(f"/tmp/s39o5-whisper_{v}_1/last_hidden_state.npy").reshape(-1)
    print("whisper", v, "vs ORT max diff", float(np.abs(a - ref).max()), "range", float(ref.max() - ref.min()))
print("whisper packed vs rows max diff", float(np.abs(out["packed"] - out["rows"]).max()))
x = np.load("/tmp/s39enc/features.npy")
ref = ort.InferenceSession("/tmp/s39enc/enc.onnx", providers=["CPUExecutionProvider"]).run(None, {"x": x})[0].reshape(-1)
for v in ("packed", "rows"):
    out[v] = a = np.load(f"/tmp/s39o5-bert_{v}_1/y.npy").reshape(-1)
    print("bert", v, "vs ORT max diff", float(np.abs(a - ref).max()), "range", float(ref.max() - ref.min()))
print("bert packed vs rows max diff", float(np.abs(out["packed"] - out["rows"]).max()))
PY
save
timeout 150 $PY scripts/whisper_encoder_baseline.py /tmp/s39wenc4 --iters 20 --compile > $W/torch_whisper.txt 2>&1
timeout 150 $PY scripts/encoder_baseline.py $E/enc.onnx $E/features.npy $W/torch_bert.json --iters 20 --compile > $W/torch_bert.txt 2>&1
save
fi
if [ "$part" = b ]; then
T=/tmp/s39tv4; mkdir -p $T
timeout 200 $PY scripts/kernel_baseline.py $T --models resnet50,mobilenet_v3_large,densenet121 --iters 50 --compile > $W/torch_tv.txt 2>&1; cp $T/torch.json $W/torch_tv.json 2>/dev/null
for m in cls:1,3,48,192 det:1,3,384,768; do n=${m%%:*}; s=${m#*:}
  PYTHONPATH=/tmp/s39o2t timeout 150 $PY scripts/onnx_torch_baseline.py /tmp/s39$n.onnx $W/torch_$n.json --shape $s --save-input /tmp/s39$n.input.npy --compile > $W/torch_$n.txt 2>&1
  grep -hE '"ms_median"|vs_ort|error|compile_s' $W/torch_$n.json || tail -3 $W/torch_$n.txt
done
for r in warm 1 2; do
  inf whisper_default_$r /tmp/s39wenc/encoder.onnx --input input_features=/tmp/s39wenc/input.npy
  TEXSTREAM_ATTENTION_PACKED_KV=1 inf whisper_wide_$r /tmp/s39wenc/encoder.onnx --input input_features=/tmp/s39wenc/input.npy
  TEXSTREAM_ATTENTION_PACKED_KV=1 TEXSTREAM_SHADER_DIR=$PWD/.dev39/spv/pko inf whisper_wideonly_$r /tmp/s39wenc/encoder.onnx --input input_features=/tmp/s39wenc/input.npy
  inf bert_default_$r $E/enc.onnx --input x=$E/features.npy
done
for r in warm 1; do
  for m in resnet50 mobilenet_v3_large densenet121; do inf ${m}_$r $T/$m.onnx --input input=$T/$m.input.npy; done
  for m in det cls; do inf ${m}_$r /tmp/s39$m.onnx --input x=/tmp/s39$m.input.npy; done
done
save
fi
cat $W/compare.txt $W/kernel_attention.txt 2>/dev/null | tail -9; grep -hE '"ms_median"|compile_s|error' $W/torch_*.json 2>/dev/null | head -40
for f in $(ls $W | grep -E '_(1|2).txt$' | sort); do
  echo "== $f $(grep -o 'GPU [0-9.]* ms' $W/$f | head -1) $(grep -E '^(Attention|MatMul) ' $W/$f | tr -s ' ' | tr '\n' ' ') $(grep -hE '^rc [1-9]' $W/$f)"; done
