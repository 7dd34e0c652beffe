#!/usr/bin/env bash
# H200 session 11, run 5 (the run-2 binary): run 4's GPU-bound open streams again with more
# samples, to tell the policies' p99 apart from the run-to-run spread: the detector alone every
# 50 ms and the chain at 10/s, 16 MiB for 75 s a policy (5 rounds), 24 MiB for 45 s (3 rounds).
# Run from the repo root like run1.sh. Outputs: $OUT/r5.tgz.
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
[ -f models/chain/lm.onnx ] || $PY scripts/make_chain_models.py models/chain > $W/chain.txt 2>&1
$PY -c "import numpy as np; np.save('models/chain/det_x.npy', np.random.default_rng(3).standard_normal((1,3,384,768)).astype(np.float32))"
run() { # cap duration rounds
  timeout 420 $T bench stream workloads/camera-plus-chain.ron --arrivals det=every:50 --arrivals request=random:10 --input x=models/chain/det_x.npy --cap $1 --duration $2 --rounds $3 --seed 23 --json $W/gpu_stream_$1.json > $W/gpu_stream_$1.txt 2>&1
  echo "rc $?" >> $W/gpu_stream_$1.txt
}
run 16MiB 75 5
run 24MiB 45 3
tar czf $OUT/r5.tgz -C $W .
for CAP in 16MiB 24MiB; do sed -n '/^policy  /,$p' $W/gpu_stream_$CAP.txt; done
