#!/usr/bin/env bash
# Session 37, run 7: Whisper's query factor, which its export applies before the head split
# (Mul(q_proj, 0.125) -> Reshape -> Transpose), joins the attention's scale
# (.dev37/ts4.xz; four Binary nodes fewer) against run 5's build (.dev37/ts3.xz), Whisper-tiny's
# encoder, two rounds; both outputs against ONNX Runtime's (whisper_encoder_baseline.py's ort.npy).
set -u
cd "$(dirname "$0")/../../.."
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
W=/tmp/d; mkdir -p /tmp/bin $W
xz -dc .dev37/ts3.xz > /tmp/bin/old; xz -dc .dev37/ts4.xz > /tmp/bin/new; chmod +x /tmp/bin/*
save() { tar czf $OUT/d.tgz -C $W .; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $W/gpu.txt 2>&1
timeout 100 $PY scripts/whisper_encoder_baseline.py /tmp/wenc --iters 5 > $W/torch_whisper.txt 2>&1
WH="/tmp/wenc/encoder.onnx --input input_features=/tmp/wenc/input.npy --repeat 20"
inf() { local s=$1 b=$2; timeout 60 /tmp/bin/$b infer $WH --precision f16 --profile 3 -o /tmp/o-$s > $W/$s.txt 2>&1; echo "rc $?" >> $W/$s.txt; }
inf warm new
for r in 1 2; do for b in old new; do inf whisper_${b}_$r $b; done; done; save
$PY - > $W/compare.txt 2>&1 <<'PY'
import numpy as np
ref = np.load("/tmp/wenc/ort.npy").reshape(-1)
for b in ("old", "new"):
    a = np.load(f"/tmp/o-whisper_{b}_1/last_hidden_state.npy").reshape(-1)
    print(b, "vs ORT max diff", float(np.abs(a - ref).max()), "range", float(ref.max() - ref.min()))
PY
save; cat $W/compare.txt; grep -E '"ms_median"' $W/torch_whisper.txt
for f in $(ls $W | grep -E '^whisper_' | sort); do
  echo "== $f $(grep -o 'GPU [0-9.]* ms' $W/$f | head -1) $(grep -hE '^(MatMul|Attention|Binary) ' $W/$f | tr -s ' ' | tr '\n' ';') $(grep -hE '^rc [1-9]' $W/$f)"; done
