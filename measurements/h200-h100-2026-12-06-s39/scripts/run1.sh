#!/usr/bin/env bash
# Session 39, run 1: the attention's key blocks loaded while the block before is multiplied
# (ATTENTION_PREFETCH, .dev39/ts1.xz) against the same binary with the kernels built without it
# (TEXSTREAM_SHADER_DIR=.dev39/spv/nopf, -DNO_ATTENTION_PREFETCH); kernel_attention on the
# device; and the kernel table with PyTorch's every variant beside it (eager, CUDA graph,
# torch.compile reduce-overhead), the OCR detector and classifier through onnx2torch.
# Two calls (each within the device's 10 minutes): `run1.sh a` (the A/B, kernel_attention, the
# encoders beside PyTorch), `run1.sh b` (the CNN and OCR rows beside PyTorch).
set -u
part=${1:-a}
cd "$(dirname "$0")/../../.."
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
W=/tmp/s39r1$part; T=/tmp/s39tv; mkdir -p /tmp/s39bin $W $T /tmp/s39o2t
xz -dc .dev39/ts1.xz > /tmp/s39bin/ts; xz -dc .dev39/ka.xz > /tmp/s39bin/ka; chmod +x /tmp/s39bin/*
for m in det cls; do xz -dc .dev39/$m.onnx.xz > /tmp/s39$m.onnx; done
$PY -m pip install --no-deps --no-index --target /tmp/s39o2t .dev39/wheels/onnx2torch-*.whl > $W/pip.txt 2>&1
save() { tar czf $OUT/d.tgz -C $W .; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $W/gpu.txt 2>&1
NOPF=$PWD/.dev39/spv/nopf
inf() { local s=$1; shift; timeout 60 /tmp/s39bin/ts infer "$@" --precision f16 --repeat 20 --profile 3 -o /tmp/s39o-$s > $W/$s.txt 2>&1; echo "rc $?" >> $W/$s.txt; }
if [ "$part" = a ]; then
# Models and PyTorch first (the encoders' scripts write the ONNX files texstream runs).
timeout 150 $PY scripts/whisper_encoder_baseline.py /tmp/s39wenc --iters 20 --compile > $W/torch_whisper.txt 2>&1
E=/tmp/s39enc; timeout 60 $PY scripts/make_scale_models.py $E --decoder 125m --reference > $W/gen_enc.txt 2>&1
save
# The A/B on Whisper and BERT, alternating, then kernel_attention.
for r in warm 1 2; do
  inf whisper_pf_$r /tmp/s39wenc/encoder.onnx --input input_features=/tmp/s39wenc/input.npy
  TEXSTREAM_SHADER_DIR=$NOPF inf whisper_nopf_$r /tmp/s39wenc/encoder.onnx --input input_features=/tmp/s39wenc/input.npy
  inf bert_pf_$r $E/enc.onnx --input x=$E/features.npy
done
save
timeout 200 /tmp/s39bin/ka --test-threads=4 > $W/kernel_attention.txt 2>&1; echo "rc $?" >> $W/kernel_attention.txt
save
timeout 150 $PY scripts/encoder_baseline.py $E/enc.onnx $E/features.npy $W/torch_bert.json --iters 20 --compile --texstream-output /tmp/s39o-bert_pf_1/y.npy > $W/torch_bert.txt 2>&1
fi
if [ "$part" = b ]; then
timeout 200 $PY scripts/kernel_baseline.py $T --models resnet50,mobilenet_v3_large,densenet121 --iters 50 --compile > $W/torch_tv.txt 2>&1; cp $T/torch.json $W/torch_tv.json 2>/dev/null
for m in det:1,3,384,768 cls:1,3,48,192; do n=${m%%:*}; s=${m#*:}
  PYTHONPATH=/tmp/s39o2t timeout 150 $PY scripts/onnx_torch_baseline.py /tmp/s39$n.onnx $W/torch_$n.json --shape $s --save-input /tmp/s39$n.input.npy --compile > $W/torch_$n.txt 2>&1
done
save
for r in warm 1; do
  for m in resnet50 mobilenet_v3_large densenet121; do inf ${m}_$r $T/$m.onnx --input input=$T/$m.input.npy; done
  for m in det cls; do inf ${m}_$r /tmp/s39$m.onnx --input x=/tmp/s39$m.input.npy; done
done
fi
$PY - > $W/compare_$part.txt 2>&1 <<'PY'
import numpy as np, os, onnxruntime as ort
def first(d): return np.load(os.path.join(d, sorted(os.listdir(d))[0]))
for m, path, inp, name in [(m, f"/tmp/s39tv/{m}.onnx", f"/tmp/s39tv/{m}.input.npy", "input") for m in ("resnet50", "mobilenet_v3_large", "densenet121")] + \
        [(m, f"/tmp/s39{m}.onnx", f"/tmp/s39{m}.input.npy", "x") for m in ("det", "cls")]:
    if not os.path.exists(path): continue
    try:
        ref = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {name: np.load(inp)})[0]
        a = first(f"/tmp/s39o-{m}_1")
        print(m, "vs ORT max diff", float(np.abs(a - ref).max()), "range", float(ref.max() - ref.min()))
    except Exception as e:
        print(m, "compare failed", repr(e)[-200:])
if not os.path.exists("/tmp/s39o-whisper_pf_1"): raise SystemExit
ref = np.load("/tmp/s39wenc/ort.npy").reshape(-1)
for v in ("pf", "nopf"):
    a = np.load(f"/tmp/s39o-whisper_{v}_1/last_hidden_state.npy").reshape(-1)
    print("whisper", v, "vs ORT max diff", float(np.abs(a - ref).max()), "range", float(ref.max() - ref.min()))
a = np.load("/tmp/s39o-whisper_pf_1/last_hidden_state.npy"); b = np.load("/tmp/s39o-whisper_nopf_1/last_hidden_state.npy")
print("whisper pf vs nopf max diff", float(np.abs(a - b).max()))
PY
save; cat $W/compare_$part.txt; tail -3 $W/kernel_attention.txt
grep -hE '"ms_median"|compile_s|vs_ort|error' $W/torch_*.json $W/torch_whisper.txt | head -60
for f in $(ls $W | grep -E '_(1|2).txt$' | sort); do
  echo "== $f $(grep -o 'GPU [0-9.]* ms' $W/$f | head -1) $(grep -E '^Attention ' $W/$f) $(grep -hE '^rc [1-9]' $W/$f)"; done
