#!/usr/bin/env bash
# H200 session 13, runs 5 and 6 (peers.sh of runs 2 and 3 again, with run 4's binary; the work
# folder is cleared first, and texstream runs the OCR models that travel in .devbin/ocr on the
# same inputs as ncnn). Run 2's description:
# texstream, PyTorch fp16 (eager, CUDA graph) and ncnn-Vulkan fp16 on the
# same torchvision ONNX files in one run (kernel_baseline.py exports them with seeded weights;
# the pnnx binary converts them for ncnn here, scripts/ncnn_baseline.py times ncnn and checks it
# against ONNX Runtime), plus ncnn on the three OCR models (converted on the CPU machine; the
# texstream OCR rows come from run 1). Device memory: nvidia-smi's memory.used sampled every
# 20 ms while each engine runs one model in its own process, minus the idle reading.
# Carries: .gl (loader debs), .ncnn/whl (the ncnn cp312 wheel), and either .ncnn/pnnx.xz with
# .devbin/texstream.xz (the torchvision half) or .ncnn/ocr (the converted OCR models). Outputs:
# $OUT/p.tgz or $OUT/p-ocr.tgz.
set -u
cd "$(dirname "$0")/../../.."
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
$PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .ncnn/whl/*.whl || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
W=/tmp/w; rm -rf $W; mkdir -p $W/tv $W/o $W/nc /tmp/bin
nvidia-smi --query-gpu=name,driver_version,memory.used --format=csv,noheader > $W/gpu.txt
# The torchvision half runs where pnnx travels, the OCR half where the converted OCR models do
# (both together are over the device call's size limit).
TV=""; OCR=""
xz -dc .devbin/texstream.xz > /tmp/bin/texstream && chmod +x /tmp/bin/texstream && export PATH=/tmp/bin:$PATH
if [ -f .ncnn/pnnx.xz ]; then
  TV="resnet18 resnet50 mobilenet_v3_large densenet121"
  xz -dc .ncnn/pnnx.xz > /tmp/bin/pnnx && chmod +x /tmp/bin/pnnx && export PATH=/tmp/bin:$PATH
  timeout 240 $PY scripts/kernel_baseline.py $W/tv --iters 50 > $W/torch.txt 2>&1
fi
if [ -d .ncnn/ocr ]; then
  OCR=$(ls .ncnn/ocr/*.ncnn.param | xargs -n1 basename | sed 's/.ncnn.param//')
  cp .ncnn/ocr/*.ncnn.* .ncnn/ocr/*.source $W/nc/
fi
$PY - <<'PY'
import numpy as np, os
W = "/tmp/w/nc"
rng = np.random.default_rng(0)
for name, shape in [("det", [1, 3, 384, 768]), ("cls", [1, 3, 48, 192]), ("rec", [1, 3, 48, 768])]:
    np.save(f"{W}/{name}.input.npy", rng.uniform(-1, 1, shape).astype(np.float32))
PY
specs=""; for m in $TV; do specs="$specs $m=$W/tv/$m.onnx:1x3x224x224"; done
[ -n "$TV" ] && timeout 300 $PY scripts/ncnn_baseline.py convert $W/nc $specs > $W/convert.txt 2>&1
peak() { # peak() LOG CMD...: runs CMD while sampling device memory, appends the peak over idle
  local log=$1; shift
  local idle; idle=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | head -1)
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 20 > $W/mem.tmp 2>/dev/null &
  local s=$!
  "$@" >> $log 2>&1; echo "rc $?" >> $log
  kill $s; wait $s 2>/dev/null
  echo "device memory peak over idle: $(( $(sort -n $W/mem.tmp | tail -1) - idle )) MiB (idle $idle MiB)" >> $log
}
for m in $TV $OCR; do
  peak $W/$m.ncnn.txt timeout 120 $PY scripts/ncnn_baseline.py run $W/nc --iters 30 --reference --only $m
done
for m in $OCR; do
  [ -f .devbin/ocr/$m.onnx ] || continue
  peak $W/$m.texstream.txt timeout 120 texstream infer .devbin/ocr/$m.onnx --input x=$W/nc/$m.input.npy -o $W/o --precision f16 --repeat 30
done
for m in $TV; do
  peak $W/$m.texstream.txt timeout 120 texstream infer $W/tv/$m.onnx --input input=$W/tv/$m.input.npy -o $W/o --precision f16 --repeat 30
done
rm -rf $W/tv/*.onnx $W/tv/*.npy $W/nc/*.bin $W/nc/*.npy $W/o
tar czf $OUT/p${OCR:+-ocr}.tgz -C $W .
cat $W/gpu.txt $W/torch.txt 2>/dev/null | grep -v Warn
for f in $W/*.ncnn.txt $W/*.texstream.txt; do echo "$(basename $f): $(grep -E '^ncnn|repeat runs|^rc|rror|peak' $f | tr '\n' ' ')"; done
