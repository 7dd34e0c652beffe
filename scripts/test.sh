#!/usr/bin/env bash
# The test command: installs what is missing, fetches the reference models, then runs every test
# on lavapipe with the Khronos validation layer on.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
# The default models (OCR det/rec/cls, Silero VAD) into models/, checked by sha256; idempotent.
"${TEXSTREAM_PYTHON:-python3}" scripts/fetch_models.py
# The real photos of text used by the OCR tests (from the scikit-image wheel), checked by sha256.
bash scripts/fetch_test_images.sh
# Tests run on Mesa's lavapipe unless the caller picked a device.
export TEXSTREAM_VALIDATION="${TEXSTREAM_VALIDATION:-1}"
cargo test --workspace --no-fail-fast -- --test-threads=2
# Short layers stacked into taller images, as where a GPU pads them (lavapipe does not, so the
# run above keeps them as they are): the kernels that read tensors by linear index, and the
# recognizer, whose stages are 3 and 6 rows tall, against ONNX Runtime. By test name over the
# same build (selecting test targets would build them again with other features).
TEXSTREAM_PAD_SHORT_LAYERS=1 cargo test --workspace --no-fail-fast -- --test-threads=2 \
  pool2d_matches_reference conv2d_matches_reference gemm_constant_b_bias_activation \
  activation_times_activation data_movement rec_matches_ort
# The operator conformance summary ("N passed, M failed, K skipped"), printed uncaptured.
cargo test --test onnx_conformance -- --nocapture 2>&1 | grep -E "^[0-9]+ passed, [0-9]+ failed"
