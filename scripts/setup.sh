#!/usr/bin/env bash
# Installs what texstream needs on a fresh Debian machine: the Vulkan loader, lavapipe (Mesa's CPU
# Vulkan driver), glslc, the Khronos validation layer, and a Rust toolchain. Skips what is present.
set -euo pipefail

need_pkgs=()
for pkg in libvulkan1 mesa-vulkan-drivers glslc vulkan-validationlayers python3-venv; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need_pkgs+=("$pkg")
done
if [ ${#need_pkgs[@]} -gt 0 ]; then
  echo "setup: installing ${need_pkgs[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_pkgs[@]}" >/dev/null
fi

if ! command -v cargo >/dev/null 2>&1; then
  if [ -x "$HOME/.cargo/bin/cargo" ]; then
    export PATH="$HOME/.cargo/bin:$PATH"
  else
    echo "setup: installing Rust with rustup"
    curl -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal
    export PATH="$HOME/.cargo/bin:$PATH"
  fi
fi
