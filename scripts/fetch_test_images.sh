#!/usr/bin/env bash
# Fetches the OCR test images (skimage/data/text.png and page.png) from a pinned scikit-image wheel
# into models/images/, checking the wheel's and the images' sha256. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."

WHEEL_SPEC="scikit-image==0.25.2"
# Pinned platform wheel so the hash is stable on every host; only two PNGs are read out of it.
WHEEL="scikit_image-0.25.2-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"
WHEEL_SHA="24cc986e1f4187a12aa319f777b36008764e856e5013666a4a83f8df083c2641"
OUT="models/images"
declare -A IMAGES=(
  [text.png]="bd84aa3a6e3c9887850d45d606c96b2e59433fbef50338570b63c319e668e6d1"
  [page.png]="341a6f0a61557662b02734a9b6e56ec33a915b2c41886b97509dedf2a43b47a3"
)
PY="${TEXSTREAM_PYTHON:-python3}"

sha_ok() { [ -f "$1" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$2" ]; }

all_ok=1
for name in "${!IMAGES[@]}"; do
  sha_ok "$OUT/$name" "${IMAGES[$name]}" || all_ok=0
done
if [ "$all_ok" = 1 ]; then
  echo "ok       $OUT/{text,page}.png"
  exit 0
fi

mkdir -p .whl "$OUT"
if ! sha_ok ".whl/$WHEEL" "$WHEEL_SHA"; then
  "$PY" -m pip download "$WHEEL_SPEC" --no-deps -q -d .whl --only-binary=:all: \
    --python-version 3.11 --implementation cp --abi cp311 --platform manylinux_2_17_x86_64
  sha_ok ".whl/$WHEEL" "$WHEEL_SHA" || { echo "fetch_test_images: .whl/$WHEEL: sha256 mismatch" >&2; exit 1; }
fi
for name in "${!IMAGES[@]}"; do
  "$PY" - ".whl/$WHEEL" "skimage/data/$name" "$OUT/$name" <<'PYEOF'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    data = z.read(sys.argv[2])
with open(sys.argv[3], "wb") as f:
    f.write(data)
PYEOF
  sha_ok "$OUT/$name" "${IMAGES[$name]}" || { echo "fetch_test_images: $OUT/$name: sha256 mismatch" >&2; exit 1; }
  echo "fetched  $OUT/$name"
done
