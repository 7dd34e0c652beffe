#!/usr/bin/env bash
# H200 session 11, run 2 (run 1 plus plans that know the engine batches compute and that use the
# measured page copy time, and the min-cool-early construction): a SmolLM2-135M-shaped decoder with random weights
# under every policy at 64 MiB, then the open request stream of camera frames and the chain at
# 24 MiB. Run from the repo root with the loader debs in .gl/ and .devbin/bundle.tar.xz (the
# release binary, the OCR models and the photos). Outputs: $OUT/r2.tgz.
set -u
cd "$(dirname "$0")/../../.."
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
B=$PWD/.devbin
tar -xJf $B/bundle.tar.xz -C $B
mkdir -p models/ocr models/images models/chain models/smollm2
cp $B/models/ocr/* models/ocr/; cp $B/models/images/* models/images/
T=$B/texstream
W=$OUT/w; mkdir -p $W
PY=/opt/torch/.venv/bin/python3
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $W/gpu.txt
[ -f models/chain/lm.onnx ] || $PY scripts/make_chain_models.py models/chain > $W/chain.txt 2>&1 &
[ -f models/smollm2/decoder.onnx ] || $PY scripts/convert_smollm2.py --random models/smollm2 > $W/convert.txt 2>&1 &
wait
timeout 200 $T run workloads/smollm2.ron --all-policies --resident-reference --residency-svg $W/smollm2.svg --metrics-json $W/smollm2.json > $W/smollm2.txt 2>&1
echo "rc $?" >> $W/smollm2.txt
timeout 280 $T bench stream workloads/camera-plus-chain.ron --arrivals frame=every:400 --arrivals request=random:2 --cap 24MiB --duration 45 --rounds 3 --seed 11 --json $W/stream.json --residency-svg $W/stream.svg > $W/stream.txt 2>&1
echo "rc $?" >> $W/stream.txt
tar czf $OUT/r2.tgz -C $W .
cat $W/gpu.txt; sed -n '/^policy  /,$p' $W/smollm2.txt; grep -E "model runs by phase|^workload" $W/smollm2.txt; tail -25 $W/stream.txt
