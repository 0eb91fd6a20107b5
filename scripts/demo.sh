#!/usr/bin/env bash
# The README's first command: installs what it needs, builds, starts Debian's stock
# virgl_test_server on a private socket with our hooks (librocm_virgl.so) and the emulated amdgpu
# preloaded, runs the demo client against it, and stops the server. Exits non-zero on any failure
# or mismatch.
#
# Usage: scripts/demo.sh [--real-gpu] [--size-kib N] [build-dir]
#   --real-gpu   use the host's AMD GPU (an amdgpu render node) instead of the emulated one
#   --size-kib   bytes the workload copies, in KiB (default 1024)
#   build-dir    default: build (shared with scripts/test.sh)
set -euo pipefail
cd "$(dirname "$0")/.."

real_gpu=0
size_kib=1024
builddir=build
while [ $# -gt 0 ]; do
  case "$1" in
    --real-gpu) real_gpu=1 ;;
    --size-kib) size_kib="$2"; shift ;;
    --size-kib=*) size_kib="${1#*=}" ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    -*) echo "demo: unknown option $1" >&2; exit 2 ;;
    *) builddir="$1" ;;
  esac
  shift
done

amdgpu_render_node() {
  # The first render node whose kernel driver is amdgpu.
  local n drv
  for n in /sys/class/drm/renderD*; do
    [ -e "$n/device/driver" ] || continue
    drv=$(basename "$(readlink -f "$n/device/driver")")
    if [ "$drv" = amdgpu ]; then echo "/dev/dri/$(basename "$n")"; return 0; fi
  done
  return 1
}

if [ "$real_gpu" = 1 ]; then
  node=$(amdgpu_render_node) || { echo "demo: --real-gpu: no amdgpu render node on this host" >&2; exit 2; }
fi

echo "== installing dependencies"
scripts/install-deps.sh
echo "== building ($builddir)"
[ -f "$builddir/build.ninja" ] || meson setup "$builddir" >/dev/null
meson compile -C "$builddir" -j "${RVGL_JOBS:-$(nproc)}" rvgl-demo rocm_virgl rvgl_emu >/dev/null

hooks="$PWD/$builddir/vrend-hooks/librocm_virgl.so"
emu="$PWD/$builddir/emu/librvgl_emu.so"
client="$PWD/$builddir/tools/demo/rvgl-demo"
server=$(command -v virgl_test_server) || { echo "demo: virgl_test_server not found" >&2; exit 2; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/rvgl-demo.XXXXXX")
server_pid=
cleanup() {
  if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT

if [ "$real_gpu" = 1 ]; then
  preload="$hooks"
  export RVGL_RENDER_NODE="$node"
  echo "== GPU: $node (real amdgpu)"
else
  preload="$emu:$hooks"
  echo "== GPU: emulated amdgpu ($(basename "$emu") preloaded)"
fi

# RVGL_COMPUTE_ONLY=1: the stock server always asks for EGL; our hooks turn that into NO_VIRGL so
# no render node is needed for the display path. '--socket-path=' needs the '=' (see docs).
echo "== starting $server on $tmp/vtest.sock"
LD_PRELOAD="$preload" RVGL_COMPUTE_ONLY=1 \
  "$server" --socket-path="$tmp/vtest.sock" >"$tmp/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 500); do
  [ -S "$tmp/vtest.sock" ] && break
  kill -0 "$server_pid" 2>/dev/null || break
  sleep 0.02
done
if [ ! -S "$tmp/vtest.sock" ]; then
  echo "demo: the server did not start; its output:" >&2
  cat "$tmp/server.log" >&2
  exit 2
fi

echo "== running the demo client"
status=0
"$client" --socket "$tmp/vtest.sock" --size-kib "$size_kib" || status=$?
if [ "$status" != 0 ]; then
  echo "== server output" >&2
  cat "$tmp/server.log" >&2
fi
exit "$status"
