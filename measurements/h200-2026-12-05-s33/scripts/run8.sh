#!/usr/bin/env bash
# Session 33, run 8 (.devbin9/: texstream and kernel_matmul with 64x96 tensor-core tiles over a
# packed A, `matmul_const_coop_pa_n96.comp`): vk-backend's kernel_matmul on those tiles forced
# (`constant_b_on_wide_cooperative_tiles_where_available`), then the Whisper-tiny encoder by
# shape (its 1500 x 384 projections on 96-column tiles) against 64-column tiles
# (TEXSTREAM_COOP_COLS=64), alternating, outputs compared, and the BERT-base-shaped encoder by
# shape (untouched: its tiles are 32 rows); last, kernel_matmul's whole tensor-core test.
set -u
cd "$(dirname "$0")/../../.."
T0=$(date +%s)
left() { echo $(( 575 - ($(date +%s) - T0) )); }
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
W=/tmp/d10; mkdir -p /tmp/bin $W
for b in ts kmat; do xz -dc .devbin9/$b.xz > /tmp/bin/$b; done; chmod +x /tmp/bin/*
save() { tar czf $OUT/d.tgz -C $W .; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $W/gpu.txt 2>&1
[ -e /tmp/wenc/encoder.onnx ] || (timeout 100 $PY scripts/whisper_encoder_baseline.py /tmp/wenc --iters 3 > $W/torch_whisper.txt 2>&1) &
TW=$!
(cd vk-backend && timeout 120 /tmp/bin/kmat constant_b_on_wide_cooperative_tiles_where_available > $W/kernel_matmul_wide.txt 2>&1; echo "rc $?" >> $W/kernel_matmul_wide.txt)
save
wait $TW
inf() { local s=$1 e=$2; shift 2
  env $e timeout 60 /tmp/bin/ts infer "$@" --precision f16 --profile 3 -o /tmp/o10-$s > $W/$s.txt 2>&1; echo "rc $?" >> $W/$s.txt; }
WH="/tmp/wenc/encoder.onnx --input input_features=/tmp/wenc/input.npy --repeat 20"
timeout 60 /tmp/bin/ts infer $WH --precision f16 -o /tmp/warm > /dev/null 2>&1
for c in n96 n64 n96_2 n64_2; do
  e=X=1; case $c in n64*) e=TEXSTREAM_COOP_COLS=64;; esac
  inf whisper_$c $e $WH
done
save
$PY - > $W/compare.txt 2>&1 <<'PYEOF'
import numpy as np
import onnxruntime as ort
x, y = np.load('/tmp/o10-whisper_n96/last_hidden_state.npy'), np.load('/tmp/o10-whisper_n64/last_hidden_state.npy')
print('whisper n96 vs n64: max diff', float(abs(x - y).max()), 'range', float(y.max() - y.min()))
s = ort.InferenceSession('/tmp/wenc/encoder.onnx', providers=['CPUExecutionProvider'])
ref = s.run(None, {'input_features': np.load('/tmp/wenc/input.npy')})[0]
print('whisper n96 vs ORT fp32: max diff', float(abs(x - ref).max()), 'range', float(ref.max() - ref.min()))
PYEOF
save
if [ $(left) -gt 200 ]; then
  (cd vk-backend && timeout $(( $(left) - 20 )) /tmp/bin/kmat constant_b_on_cooperative_matrices_where_available > $W/kernel_matmul.txt 2>&1; echo "rc $?" >> $W/kernel_matmul.txt)
  save
fi
tail -n 3 $W/kernel_matmul_wide.txt $W/kernel_matmul.txt
for f in whisper_n96 whisper_n64 whisper_n96_2 whisper_n64_2; do echo "== $f"; grep -hE "repeat runs|^MatMul " $W/$f.txt; grep -A6 "by op and shape" $W/$f.txt | grep MatMul; done
cat $W/compare.txt
echo "elapsed $(( $(date +%s) - T0 )) s"
