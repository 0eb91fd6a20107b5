#!/usr/bin/env bash
# Installs the Debian 12 packages that building, testing and the demo need. Idempotent.
set -euo pipefail

packages=(
  build-essential pkg-config meson ninja-build clang libclang-rt-14-dev libfuzzer-14-dev
  libdrm-dev libvirglrenderer-dev virgl-server mesa-vulkan-drivers libvulkan-dev
  libegl1 libegl-mesa0 libgl1-mesa-dri  # software EGL: the VIRGL2 (vrend) test beside ROCM
  catch2 libbenchmark-dev nlohmann-json3-dev libcli11-dev libfmt-dev libpng-dev
  gnuplot-nox valgrind python3 procps
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

sudo=()
[ "$(id -u)" -ne 0 ] && sudo=(sudo)
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -q
"${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
