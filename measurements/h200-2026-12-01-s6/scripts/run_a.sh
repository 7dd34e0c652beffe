#!/usr/bin/env bash
# H200 session 6, run A: the engine path on camera-ocr (every policy), service overhead
# (loadgen vs the library), reloads under load. Outputs under $OUT.
set -u
cd "$(dirname "$0")/.."
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
B=$PWD/.devbin
tar -xJf $B/bundle.tar.xz -C $B
mkdir -p models/ocr models/images models/chain
cp $B/models/ocr/* models/ocr/; cp $B/models/images/* models/images/
T=$B/texstream
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/gpu.txt
/opt/torch/.venv/bin/python3 scripts/make_chain_models.py models/chain > $OUT/chain.txt 2>&1
# 1. camera-ocr through the engine, every policy, resident reference.
timeout 200 $T run workloads/camera-ocr.ron --iterations 12 --all-policies --resident-reference > $OUT/ocr_policies.txt 2>&1
echo "rc $?" >> $OUT/ocr_policies.txt
# 2. the service's overhead: loadgen against serve, beside the library call in the same run.
$T serve tests/data/serve/tiny.ron --listen 127.0.0.1:8000 > $OUT/serve_log.txt 2>&1 &
SP=$!
for i in $(seq 1 100); do curl -sf http://127.0.0.1:8000/v2/health/ready >/dev/null && break; sleep 0.2; done
timeout 120 $T loadgen --url http://127.0.0.1:8000 --model chain --input pixels=tests/data/serve/pixels.npy -c 1 -n 2000 --compare-library tests/data/serve/tiny.ron > $OUT/loadgen_c1.txt 2>&1
timeout 120 $T loadgen --url http://127.0.0.1:8000 --model chain --input pixels=tests/data/serve/pixels.npy -c 8 -n 500 > $OUT/loadgen_c8.txt 2>&1
curl -s http://127.0.0.1:8000/metrics > $OUT/metrics.txt
kill -TERM $SP; wait $SP; echo "serve exit $?" >> $OUT/serve_log.txt
# 3. reloads under load: 100 reloads, every 4th invalid (25), on camera-ocr and the tiny one.
timeout 150 $T bench reloads workloads/camera-ocr.ron --pipeline frame --reloads 100 --invalid-every 4 > $OUT/reloads_ocr.txt 2>&1
echo "rc $?" >> $OUT/reloads_ocr.txt
cat $OUT/gpu.txt; sed -n '/^policy  /,$p' $OUT/ocr_policies.txt | head -12; tail -12 $OUT/loadgen_c1.txt; tail -6 $OUT/loadgen_c8.txt; tail -8 $OUT/reloads_ocr.txt
