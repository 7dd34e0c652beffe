#!/usr/bin/env bash
# H200 session 11, run 4 (the run-2 binary; run 3 at 70 requests a second saturated the worker): open request streams where the GPU, not the OCR
# pipeline's CPU steps, sets the latency: the detector alone (a fixed tensor) every 50 ms and the
# three-model chain at random times, 10 a second, under 24 MiB and 16 MiB (the six models hold 86
# MiB of fp16 weight pages). Run from the repo root like run1.sh. Outputs: $OUT/r4.tgz.
set -u
cd "$(dirname "$0")/../../.."
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
B=$PWD/.devbin
tar -xJf $B/bundle.tar.xz -C $B
mkdir -p models/ocr models/images models/chain
cp $B/models/ocr/* models/ocr/; cp $B/models/images/* models/images/
T=$B/texstream
W=$OUT/w; mkdir -p $W
PY=/opt/torch/.venv/bin/python3
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $W/gpu.txt
[ -f models/chain/lm.onnx ] || $PY scripts/make_chain_models.py models/chain > $W/chain.txt 2>&1
$PY -c "import numpy as np; np.save('models/chain/det_x.npy', np.random.default_rng(3).standard_normal((1,3,384,768)).astype(np.float32))"
for CAP in 24MiB 16MiB; do
  timeout 280 $T bench stream workloads/camera-plus-chain.ron --arrivals det=every:50 --arrivals request=random:10 --input x=models/chain/det_x.npy --cap $CAP --duration 30 --rounds 3 --seed 11 --json $W/gpu_stream_$CAP.json --residency-svg $W/gpu_stream_$CAP.svg > $W/gpu_stream_$CAP.txt 2>&1
  echo "rc $?" >> $W/gpu_stream_$CAP.txt
done
tar czf $OUT/r4.tgz -C $W .
cat $W/gpu.txt; for CAP in 24MiB 16MiB; do sed -n '/^policy  /,$p' $W/gpu_stream_$CAP.txt; done
