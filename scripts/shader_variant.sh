#!/usr/bin/env bash
# Compiles kernels' SPIR-V for TEXSTREAM_SHADER_DIR (vk-backend's DeviceOptions::shader_dir),
# named as the build names its embedded variants: every shaders/<glob>.comp, from a copy of
# shaders/ with the shader parts of the given patches (git diffs of this repository) applied.
#
#   scripts/shader_variant.sh OUT_DIR GLOB [PATCH...] [-- GLSLC_ARGS...]
#
# VARIANTS (default "f16") picks among f16, f32 and f32w16 (fp32 activations over fp16
# weights; the build has it only for kernels that read the weight atlas). Example, the
# tensor-core MatMuls with a patch and one define, then a run with them:
#   scripts/shader_variant.sh /tmp/spv 'matmul_const_coop*' my.patch -- -DKG=2
#   TEXSTREAM_SHADER_DIR=/tmp/spv texstream infer MODEL --precision f16 --profile 3
set -euo pipefail
if [ $# -lt 2 ]; then
  sed -n '2,12p' "$0" >&2
  exit 2
fi
out=$1 glob=$2
shift 2
patches=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do patches+=("$(realpath "$1")"); shift; done
[ "${1:-}" = "--" ] && shift
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r "$root/shaders" "$work/shaders"
for p in "${patches[@]}"; do
  (cd "$work" && git apply --include='shaders/*' "$p") || {
    echo "shader_variant.sh: $p does not apply to shaders/" >&2
    exit 1
  }
done
mkdir -p "$out"
srcs=()
for src in "$work"/shaders/$glob.comp; do
  [ -e "$src" ] && srcs+=("$src")
done
if [ ${#srcs[@]} -eq 0 ]; then
  echo "shader_variant.sh: no shaders/$glob.comp" >&2
  exit 1
fi
for src in "${srcs[@]}"; do
  name=$(basename "$src" .comp)
  for v in ${VARIANTS:-f16}; do
    case $v in
      f16) defs="-DFMT=rgba16f -DWFMT=rgba16f -DTENSOR_HALF=1" ;;
      f32) defs="-DFMT=rgba32f -DWFMT=rgba32f -DTENSOR_HALF=0" ;;
      f32w16) defs="-DFMT=rgba32f -DWFMT=rgba16f -DTENSOR_HALF=0" ;;
      *) echo "shader_variant.sh: variant $v (f16, f32 or f32w16)" >&2; exit 2 ;;
    esac
    # shellcheck disable=SC2086
    glslc --target-env=vulkan1.2 -O $defs "-I$work/shaders/include" "$@" "$src" -o "$out/$name.$v.spv"
    echo "$out/$name.$v.spv"
  done
done
