#!/usr/bin/env bash
# The README's test command: installs what it needs, configures, builds and runs the whole suite.
# Usage: scripts/test.sh [build-dir]   (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
builddir=${1:-build}
if [ -d "$builddir" ]; then
  meson setup --reconfigure "$builddir" -Dtests=true
else
  meson setup "$builddir" -Dtests=true
fi
ninja -C "$builddir"
meson test -C "$builddir" --print-errorlogs --num-processes 2
