#!/usr/bin/env bash
# H200 session 16: stream.sh's runs (its arguments), then workloads/camera-plus-scale.ron as
# an open request stream: camera frames every 100 ms and an assistant-scale turn (1.34 B
# decoder) every 3 s under one cap, per policy
# (`texstream bench stream ... --duration ${DUR:-30}`; ARRIVALS="--arrivals ..." replaces the
# rates).
# Carries .gl, .devbin/texstream.xz and .ocr (the OCR models' ONNX files, xz'd, and
# page.png). Outputs: $OUT/s.tgz (stream.sh) and $OUT/c.tgz.
set -u
cd "$(dirname "$0")/../../.."
mkdir -p models/ocr models/images
for f in .ocr/*.xz; do xz -dc $f > models/ocr/$(basename ${f%.xz}); done
cp .ocr/cls.onnx models/ocr/; cp .ocr/page.png models/images/
[ $# -gt 0 ] && bash measurements/h200-2026-12-03-s16/scripts/stream.sh "$@"
W=/tmp/c; rm -rf $W; mkdir -p $W
S=$(date +%s%3N)
/tmp/bin/texstream check workloads/camera-plus-scale.ron > $W/check.txt 2>&1
echo "check (compile): rc $? in $(( $(date +%s%3N) - S )) ms" >> $W/check.txt
timeout 400 /tmp/bin/texstream bench stream workloads/camera-plus-scale.ron \
  ${ARRIVALS:---arrivals frame=every:100 --arrivals turn=every:3000} --duration ${DUR:-30} \
  --json $W/camera-plus-scale.json > $W/camera-plus-scale.txt 2>&1
echo "rc $?" >> $W/camera-plus-scale.txt
tar czf $OUT/c.tgz -C $W .
tail -2 $W/check.txt; tail -40 $W/camera-plus-scale.txt
