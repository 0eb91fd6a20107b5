// Host instructions per request, counted by callgrind: one command buffer of N requests through
// the context core, with instrumentation on only around submit_cmd. Run it under
//   valgrind --tool=callgrind --collect-atstart=no --callgrind-out-file=OUT rvgl-dispatch-count
//   KIND N
// and divide the Ir of OUT by N; two values of N, subtracted, remove the per-submit fixed cost
// (scripts/bench.sh does both).
#include <valgrind/callgrind.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "rvgl_emu.h"
#include "support/core_stream.h"

int main(int argc, char **argv) {
  using rvgl::bench::SmallRequest;
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s nop|query-usage|query-memory N\n", argv[0]);
    return 2;
  }
  const std::string kind_arg = argv[1];
  SmallRequest kind;
  if (kind_arg == "nop") {
    kind = SmallRequest::kNop;
  } else if (kind_arg == "query-usage") {
    kind = SmallRequest::kQueryUsage;
  } else if (kind_arg == "query-memory") {
    kind = SmallRequest::kQueryMemory;
  } else {
    std::fprintf(stderr, "unknown request kind %s\n", argv[1]);
    return 2;
  }
  const long n = std::strtol(argv[2], nullptr, 10);
  if (n <= 0 || n > 60000) {
    std::fprintf(stderr, "N must be in 1..60000\n");
    return 2;
  }
  rvgl_emu_set_knob("RVGL_EMU_TRACE", "0");

  rvgl::bench::CoreContext core;
  core.build(kind, static_cast<uint32_t>(n));
  // One unmeasured batch first: first-touch costs (scratch buffer growth, page faults in the
  // response area, lazy binding) belong to no request in steady state.
  if (core.submit()) return 1;
  core.renumber();

  // Instrumentation (--instr-atstart=no) and collection (--collect-atstart=no) are separate
  // switches in callgrind: both go on for the submit only.
  CALLGRIND_START_INSTRUMENTATION;
  CALLGRIND_ZERO_STATS;
  CALLGRIND_TOGGLE_COLLECT;
  const int r = core.submit();
  CALLGRIND_TOGGLE_COLLECT;
  CALLGRIND_STOP_INSTRUMENTATION;

  if (r || !core.all_answered_ok()) {
    std::fprintf(stderr, "submit failed (%d) or a request was not answered with 0\n", r);
    return 1;
  }
  std::printf("%s %ld requests submitted\n", rvgl::bench::small_request_name(kind), n);
  return 0;
}
