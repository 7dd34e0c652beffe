#!/usr/bin/env bash
# H200: camera-ocr's minimum with the 512 KiB upload piece and a run at it (every policy).
set -u
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
B=$PWD/.devbin
msg=$($B/texstream run workloads/camera-ocr.ron --iterations 3 --cap 1MiB 2>&1 | grep -m1 'minimum feasible cap')
echo "$msg" > $OUT/mins.txt
omin=$(echo "$msg" | grep -o 'minimum feasible cap [0-9]*' | awk '{print $4}')
timeout 100 $B/texstream run workloads/camera-ocr.ron --iterations 12 --all-policies --resident-reference --cap ${omin}B > $OUT/ocr_min.txt 2>&1
echo "rc $?" >> $OUT/ocr_min.txt
timeout 100 $B/texstream run workloads/camera-ocr.ron --iterations 4 > $OUT/ocr_default.txt 2>&1
echo "rc $?" >> $OUT/ocr_default.txt
cat $OUT/mins.txt; sed -n '/^policy  /,/^rc/p' $OUT/ocr_min.txt; grep -E "peak device|^  [0-9]" $OUT/ocr_default.txt
