#!/usr/bin/env bash
# H200 session 6, run C (after plans made ahead): the open stream at two caps, then the service
# overhead and reloads under load again with the same binary.
set -u
cd "$(dirname "$0")/.."
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
B=$PWD/.devbin
tar -xJf $B/bundle.tar.xz -C $B
mkdir -p models/ocr models/images models/chain
cp $B/models/ocr/* models/ocr/; cp $B/models/images/* models/images/
[ -f models/chain/lm.onnx ] || /opt/torch/.venv/bin/python3 scripts/make_chain_models.py models/chain > $OUT/chain.txt 2>&1
T=$B/texstream
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/gpu.txt
for CAP in 40MiB 24MiB; do
  timeout 200 $T bench stream workloads/camera-plus-chain.ron --arrivals frame=every:400 --arrivals request=random:2 --duration 30 --cap $CAP --json $OUT/stream_$CAP.json > $OUT/stream_$CAP.txt 2>&1
  echo "rc $?" >> $OUT/stream_$CAP.txt
done
$T serve tests/data/serve/tiny.ron --listen 127.0.0.1:8000 > $OUT/serve_log.txt 2>&1 &
SP=$!
for i in $(seq 1 100); do curl -sf http://127.0.0.1:8000/v2/health/ready >/dev/null && break; sleep 0.2; done
timeout 60 $T loadgen --url http://127.0.0.1:8000 --model chain --input pixels=tests/data/serve/pixels.npy -c 1 -n 2000 --compare-library tests/data/serve/tiny.ron > $OUT/loadgen_c1.txt 2>&1
timeout 60 $T loadgen --url http://127.0.0.1:8000 --model chain --input pixels=tests/data/serve/pixels.npy -c 8 -n 500 > $OUT/loadgen_c8.txt 2>&1
curl -s http://127.0.0.1:8000/metrics > $OUT/metrics.txt
kill -TERM $SP; wait $SP; echo "serve exit $?" >> $OUT/serve_log.txt
timeout 100 $T bench reloads workloads/camera-ocr.ron --pipeline frame --reloads 100 --invalid-every 4 > $OUT/reloads_ocr.txt 2>&1
echo "rc $?" >> $OUT/reloads_ocr.txt
for CAP in 40MiB 24MiB; do sed -n '/^policy  /,$p' $OUT/stream_$CAP.txt; done; tail -n 4 $OUT/loadgen_c1.txt; tail -n 3 $OUT/loadgen_c8.txt; tail -n 7 $OUT/reloads_ocr.txt; tail -n 2 $OUT/serve_log.txt
