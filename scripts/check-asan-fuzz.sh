#!/usr/bin/env bash
# One clang tree with ASan+UBSan and libFuzzer coverage: runs the test suite under the sanitizers,
# then each fuzzer for a bounded time on a copy of its seed corpus. Fails on any sanitizer report,
# test failure or fuzzer crash. Usage: scripts/check-asan-fuzz.sh [seconds per fuzzer] (default 90)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
seconds=${1:-90}
builddir=build-ci-asan
[ -d "$builddir" ] || CC=clang CXX=clang++ meson setup "$builddir" -Dtests=true -Dfuzzers=true \
  -Db_sanitize=address,undefined -Db_lundef=false -Dbuildtype=debugoptimized
ninja -C "$builddir" fuzz/fuzz-protocol fuzz/fuzz-api fuzz/fuzz-vtest fuzz/fuzz-lifecycle

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
# Suites that LD_PRELOAD an instrumented library into an uninstrumented program (the stock
# virgl_test_server) cannot run here: ASan insists on coming first. They run in the plain build.
# (--no-rebuild: a listing that regenerates the build would print meson's log among the names.)
mapfile -t tests < <(meson test -C "$builddir" --list --no-rebuild 2>/dev/null |
                     sed -n 's|^.* / ||p' | grep -v -e e2e -e preload -e stock)
[ ${#tests[@]} -gt 0 ] || { echo "check-asan-fuzz: no tests listed" >&2; exit 1; }
echo "ASan+UBSan: ${#tests[@]} suites: ${tests[*]}"
# vrend (hooks-virgl2 and the QEMU profiles, which create legacy GL contexts) loads Mesa's software
# GL driver and dlcloses it at exit: what the driver's statics still pointed to then looks like a
# leak "from an unknown module" to LSan. Those suites run with the driver kept loaded, so LSan
# still checks everything of ours there.
vrend=() rest=()
for t in "${tests[@]}"; do
  case $t in hooks-virgl2 | hooks-profile-*) vrend+=("$t") ;; *) rest+=("$t") ;; esac
done
meson test -C "$builddir" --print-errorlogs --num-processes 2 "${rest[@]}"
if [ ${#vrend[@]} -gt 0 ]; then
  dri=$(ls /usr/lib/*/dri/swrast_dri.so 2>/dev/null | head -n 1 || true)
  wrapper=()
  [ -n "$dri" ] && wrapper=(--wrapper "env LD_PRELOAD=$dri")
  ASAN_OPTIONS=$ASAN_OPTIONS:verify_asan_link_order=0 \
    meson test -C "$builddir" --print-errorlogs --num-processes 2 "${wrapper[@]}" "${vrend[@]}"
fi

for h in protocol api vtest lifecycle; do
  corpus=$(mktemp -d)
  cp -r "fuzz/corpus/$h/." "$corpus/"
  dict=()
  [ -f "fuzz/$h.dict" ] && dict=(-dict="fuzz/$h.dict")
  echo "fuzz-$h: ${seconds}s"
  log="$builddir/fuzz-$h.log"
  rc=0
  LSAN_OPTIONS=suppressions=$PWD/fuzz/lsan.supp RVGL_EMU_PROFILE=gfx1100 RVGL_EMU_TRACE=0 \
    "$builddir/fuzz/fuzz-$h" "$corpus" "${dict[@]}" \
    -max_total_time="$seconds" -timeout=20 -rss_limit_mb=4096 -print_final_stats=1 \
    -artifact_prefix="$builddir/fuzz-$h-" > "$log" 2>&1 || rc=$?
  rm -rf "$corpus"
  if [ "$rc" -ne 0 ]; then
    # Everything after the fuzzing ended: the report and its stack, a sanitizer's own message
    # (e.g. LeakSanitizer's at exit), and what the run was doing, unfiltered.
    echo "fuzz-$h: exit status $rc; the end of its output ($log):"
    tail -n 80 "$log"
    exit "$rc"
  fi
  grep -E "^#[0-9]+ +(INITED|DONE)|cov:.*ft:|stat::" "$log" | tail -6
done
