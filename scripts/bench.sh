#!/usr/bin/env bash
# The benchmark command (docs/performance.md): installs what it needs, configures a release build
# with the benchmarks, builds them, runs every benchmark and writes the JSON results, the callgrind
# counts and a summary into the results folder.
#
# Usage: scripts/bench.sh [results-dir]
#   results-dir             default: <build-dir>/bench-results
#   RVGL_BENCH_BUILDDIR     build directory (default: build-bench)
#   RVGL_BENCH_FILTER       optional --benchmark_filter for the Google Benchmark programs
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh

builddir=${RVGL_BENCH_BUILDDIR:-build-bench}
results=${1:-$builddir/bench-results}
options=(-Dbench=true -Dtests=false -Dbuildtype=release)
if [ -d "$builddir" ]; then
  meson setup --reconfigure "$builddir" "${options[@]}" >/dev/null
else
  meson setup "$builddir" "${options[@]}" >/dev/null
fi
ninja -C "$builddir" bench/rvgl-bench-api bench/rvgl-bench-dispatch bench/rvgl-dispatch-count \
  bench/rvgl-bench-vtest emu/librvgl_emu.so vrend-hooks/librocm_virgl.so.0.1.0
mkdir -p "$results"
results=$(cd "$results" && pwd)

# A private emulator state directory: no lock or counters file shared with other runs.
state_dir=$(mktemp -d "${TMPDIR:-/tmp}/rvgl-bench-XXXXXX")
trap 'rm -rf "$state_dir"' EXIT
export RVGL_EMU_STATE_DIR=$state_dir RVGL_EMU_TRACE=0 RVGL_EMU_JOB_LATENCY_US=0
export RVGL_E2E_SERVER=${RVGL_E2E_SERVER:-$(command -v virgl_test_server)}
export RVGL_E2E_PRELOAD=$PWD/$builddir/emu/librvgl_emu.so:$PWD/$builddir/vrend-hooks/librocm_virgl.so

{
  echo "date: $(date -u +%FT%TZ)"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "nproc: $(nproc)"
  echo "loadavg at start: $(cat /proc/loadavg)"
  lscpu
} >"$results/machine.txt"

filter=()
[ -n "${RVGL_BENCH_FILTER:-}" ] && filter=(--benchmark_filter="$RVGL_BENCH_FILTER")
# A program with a failed benchmark exits non-zero; the others still run, and so does this script,
# which fails at the end.
failed=()
for prog in rvgl-bench-dispatch rvgl-bench-api rvgl-bench-vtest; do
  echo "== $prog"
  "$builddir/bench/$prog" "${filter[@]}" --benchmark_out="$results/$prog.json" \
    --benchmark_out_format=json --benchmark_counters_tabular=true || failed+=("$prog")
done

# Instructions per request: callgrind counts only the submit (see bench/dispatch_count.cpp); two
# batch sizes, subtracted, leave the per-request cost without the per-submit fixed cost.
small=1000
large=3000
{
  echo "{"
  first=1
  for kind in nop query-usage; do
    declare -A ir=()
    for n in $small $large; do
      out="$results/callgrind.$kind.$n"
      valgrind --tool=callgrind --collect-atstart=no --instr-atstart=no \
        --callgrind-out-file="$out" "$builddir/bench/rvgl-dispatch-count" "$kind" "$n" \
        >/dev/null 2>"$out.log"
      ir[$n]=$(awk '/^totals:/ {print $2}' "$out")
    done
    callgrind_annotate --inclusive=no "$results/callgrind.$kind.$large" \
      >"$results/callgrind.$kind.annotate.txt" 2>/dev/null || true
    per=$(( (ir[$large] - ir[$small]) / (large - small) ))
    fixed=$(( ir[$small] - per * small ))
    [ $first -eq 1 ] || echo ","
    first=0
    printf '  "%s": {"instructions_per_request": %d, "fixed_instructions_per_submit": %d, "ir_%d": %d, "ir_%d": %d}' \
      "$kind" "$per" "$fixed" "$small" "${ir[$small]}" "$large" "${ir[$large]}"
    unset ir
  done
  echo
  echo "}"
} >"$results/dispatch_instructions.json"
echo "== dispatch instructions"
cat "$results/dispatch_instructions.json"

# Instructions per single-NOP virgl_renderer_submit_cmd, from the API entry to the response
# (bench/api_nop_count.cpp): the measured window minus the same window around an empty call.
{
  declare -A api=()
  for mode in call empty; do
    out="$results/callgrind.api-nop.$mode"
    arg=()
    [ "$mode" = empty ] && arg=(empty)
    valgrind --tool=callgrind --collect-atstart=no --instr-atstart=no \
      --callgrind-out-file="$out" "$builddir/bench/rvgl-api-nop-count" 3000 "${arg[@]}" \
      >/dev/null 2>"$out.log"
    api[$mode]=$(awk '/^totals:/ {print $2}' "$out")
  done
  callgrind_annotate --inclusive=no "$results/callgrind.api-nop.call" \
    >"$results/callgrind.api-nop.annotate.txt" 2>/dev/null || true
  printf '{"instructions_per_call": %d, "calls": 3000, "ir_calls": %d, "ir_empty_window": %d}\n' \
    $(( (api[call] - api[empty]) / 3000 )) "${api[call]}" "${api[empty]}"
} >"$results/api_nop_instructions.json"
echo "== API-path instructions (one NOP per submit_cmd)"
cat "$results/api_nop_instructions.json"

python3 - "$results" <<'PY' | tee "$results/summary.txt"
import json, pathlib, sys
res = pathlib.Path(sys.argv[1])
def rows(name):
    p = res / f"{name}.json"
    # A filter that matches nothing in a program leaves its JSON file empty.
    text = p.read_text() if p.exists() else ""
    return json.loads(text)["benchmarks"] if text.strip() else []
def show(b, keys):
    vals = ", ".join(f"{k}={b[k]:.4g}" for k in keys if k in b)
    label = f" [{b['label']}]" if b.get("label") else ""
    err = f" ERROR: {b['error_message']}" if b.get("error_occurred") else ""
    print(f"{b['name']}{label}: {vals}{err}")
for b in rows("rvgl-bench-api") + rows("rvgl-bench-vtest") + rows("rvgl-bench-dispatch"):
    show(b, ["direct_ns_per_job", "virgl_ns_per_job", "vtest_ns_per_job", "efficiency",
             "efficiency_paired_median", "direct_cpu_ns_per_job", "virgl_cpu_ns_per_job",
             "efficiency_cpu", "direct_gpu_cpu_ns_per_job", "direct_vmm_cpu_ns_per_job",
             "virgl_gpu_cpu_ns_per_job", "virgl_engine_cpu_ns_per_job", "virgl_vmm_cpu_ns_per_job",
             "direct_ioctls_per_job", "virgl_ioctls_per_job",
             "vtest_fences_stuck", "wall_ns_per_call", "cpu_ns_per_call", "direct_wait_median_ns", "direct_wait_p99_ns",
             "virgl_callback_median_ns", "virgl_callback_p99_ns", "vtest_wait_median_ns",
             "vtest_wait_p99_ns", "ratio_median", "ratio_p99", "one_ctx_ns_per_op",
             "many_ns_per_op", "cost_ratio", "direct_cost_ratio", "cost_ratio_over_direct",
             "rss_KiB_per_idle_context", "memcpy_ms",
             "import_ms", "import_vs_memcpy", "host_gem_objects", "host_udmabufs",
             "gpu_bytes_copied", "rss_delta_bytes", "ns_per_request", "cpu_ns_per_request"])
d = json.loads((res / "dispatch_instructions.json").read_text())
for k, v in d.items():
    print(f"callgrind {k}: {v['instructions_per_request']} instructions/request "
          f"(+{v['fixed_instructions_per_submit']} per submit)")
PY
echo "results in $results"
if [ ${#failed[@]} -ne 0 ]; then
  echo "benchmarks with errors in: ${failed[*]} (see the JSON error_message fields)" >&2
  exit 1
fi
