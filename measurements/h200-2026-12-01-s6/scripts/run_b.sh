#!/usr/bin/env bash
# H200 session 6, run B: an open request stream of two pipelines (camera frames every 100 ms,
# chain requests at random, 2/s) under one cap below the weights, planned vs on-demand vs lru.
set -u
cd "$(dirname "$0")/.."
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
B=$PWD/.devbin
[ -x $B/texstream ] || tar -xJf $B/bundle.tar.xz -C $B
mkdir -p models/ocr models/images models/chain
cp -n $B/models/ocr/* models/ocr/ 2>/dev/null; cp -n $B/models/images/* models/images/ 2>/dev/null
[ -f models/chain/lm.onnx ] || /opt/torch/.venv/bin/python3 scripts/make_chain_models.py models/chain > $OUT/chain.txt 2>&1
T=$B/texstream
CAP=${CAP:-40MiB}
timeout 400 $T bench stream workloads/camera-plus-chain.ron --arrivals frame=every:100 --arrivals request=random:2 --duration 25 --cap $CAP --json $OUT/stream.json > $OUT/stream.txt 2>&1
echo "rc $?" >> $OUT/stream.txt
timeout 100 $T bench reloads tests/data/serve/tiny.ron --pipeline chain --reloads 100 --invalid-every 4 > $OUT/reloads_tiny.txt 2>&1
cat $OUT/stream.txt; tail -7 $OUT/reloads_tiny.txt
