#!/usr/bin/env bash
# The main job (README's first command): camera OCR — detector -> angle classifier -> recognizer,
# fanned out over the detected boxes, on a real photo of a page, repeated as camera frames, with
# the models' weights streamed through one paged atlas under a cap below what preloading takes.
# Installs what is missing, fetches and compiles the models, then runs. Extra arguments go to
# `texstream run` (e.g. --cap 60MiB, --policy lru, --all-policies, --metrics-json m.json).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
"${TEXSTREAM_PYTHON:-python3}" scripts/fetch_models.py
bash scripts/fetch_test_images.sh
cargo build --release --quiet --bin texstream
TS=target/release/texstream
if [ -n "${CARGO_TARGET_DIR:-}" ]; then TS="$CARGO_TARGET_DIR/release/texstream"; fi
# `texstream run` compiles the workload's ONNX models to packed files (with the shapes the workload
# declares) when they are missing or out of date.
exec "$TS" run workloads/camera-ocr.ron "$@"
