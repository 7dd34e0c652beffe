#!/usr/bin/env bash
# The main job (README's first command): camera OCR — detector -> angle classifier -> recognizer,
# fanned out over the detected boxes, on a real photo of a page, repeated as camera frames, with
# the models' weights streamed through one paged atlas under a cap well below their total.
# Installs what is missing, fetches and compiles the models, then runs. Extra arguments go to
# `texstream run` (e.g. --cap 12MiB, --policy lru, --all-policies, --metrics-json m.json).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
"${TEXSTREAM_PYTHON:-python3}" scripts/fetch_models.py
bash scripts/fetch_test_images.sh
cargo build --release --quiet --bin texstream
TS=target/release/texstream
if [ -n "${CARGO_TARGET_DIR:-}" ]; then TS="$CARGO_TARGET_DIR/release/texstream"; fi
# Input shapes must match workloads/camera-ocr.ron; compile writes models/ocr/*.tspk next to the ONNX.
compile() { # model shape
  local onnx="models/ocr/$1.onnx" out="models/ocr/$1.tspk"
  # Always recompiled (well under a second each), so a changed shape never meets a stale file.
  "$TS" compile "$onnx" --input "x=$2" -o "$out" >/dev/null
}
compile det 1x3x384x768
compile cls 1x3x48x192
compile rec 1x3x48x768
exec "$TS" run workloads/camera-ocr.ron "$@"
