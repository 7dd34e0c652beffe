#!/usr/bin/env bash
# H200 measurements (session 5): per-model latency vs ORT; camera-ocr at its minimum cap and with
# 25% / 50% of its 17 MiB of weights as slots (4 / 8 pages), every policy + resident reference;
# the assistant chain at 16 MiB.
set -u
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
B=$PWD/.devbin
mkdir -p /work && ln -sfn "$PWD" /work/main && mkdir -p target/tmp
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/gpu.txt 2>&1
timeout 70 python3 scripts/bench_models.py --texstream $B/texstream --repeat 20 > $OUT/bench_models.txt 2>&1
echo "rc $?" >> $OUT/bench_models.txt
msg=$($B/texstream run workloads/camera-ocr.ron --iterations 3 --cap 1MiB 2>&1 | grep -m1 'minimum feasible cap')
echo "$msg" > $OUT/mins.txt
omin=$(echo "$msg" | grep -o 'minimum feasible cap [0-9]*' | awk '{print $4}')
slot=$(echo "$msg" | grep -o '([0-9]* B each)' | tr -dc 0-9)
pages=$(echo "$msg" | grep -o 'reads [0-9]* pages' | awk '{print $2}')
c25=$(( omin + (4 - pages) * slot )); c50=$(( omin + (8 - pages) * slot ))
echo "min $omin slot $slot step pages $pages cap25 $c25 cap50 $c50" >> $OUT/mins.txt
for cap in ${omin}B ${c25}B ${c50}B; do
  timeout 100 $B/texstream run workloads/camera-ocr.ron --iterations 12 --all-policies --resident-reference --cap $cap --metrics-json $OUT/ocr_$cap.json > $OUT/ocr_$cap.txt 2>&1
  echo "rc $?" >> $OUT/ocr_$cap.txt
done
python3 scripts/make_chain_models.py models/chain > $OUT/chain_gen.txt 2>&1
timeout 120 $B/texstream run workloads/assistant-chain.ron --iterations 30 --all-policies --resident-reference --cap 16MiB --metrics-json $OUT/chain_16MiB.json > $OUT/chain_16MiB.txt 2>&1
echo "rc $?" >> $OUT/chain_16MiB.txt
cd $OUT && tar czf ocr_json.tgz *.json && rm -f *.json
