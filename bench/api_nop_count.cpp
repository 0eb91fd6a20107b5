// Host instructions from the virglrenderer API entry to the response, for the smallest request a
// VMM relays: one NOP per virgl_renderer_submit_cmd (issue 13, point 7: goal <= 250). Counted by
// callgrind with collection on only around each submit_cmd call, so the total divided by the
// number of calls is the cost of one call through our library (router, context, decoder,
// handler, response). Run it under
//   valgrind --tool=callgrind --collect-atstart=no --instr-atstart=no --callgrind-out-file=OUT
//   rvgl-api-nop-count N
// and divide the Ir of OUT by N, after subtracting the same run with `empty` (the window around a
// call that does nothing: the caller's share). scripts/bench.sh does both.
#include <valgrind/callgrind.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "rvgl_emu.h"

namespace {

// The empty window: the same call with the same arguments to a function that does nothing, so
// the caller's own instructions inside the window (argument set-up, the call, callgrind's
// client requests) can be subtracted.
__attribute__((noinline)) int empty_submit(void *buffer, int ctx_id, int ndw) {
  asm volatile("" : : "r"(buffer), "r"(ctx_id), "r"(ndw) : "memory");
  return 0;
}

}  // namespace
#include "support/api_guest.h"
#include "support/virgl_host.h"

int main(int argc, char **argv) {
  if (argc != 2 && !(argc == 3 && std::strcmp(argv[2], "empty") == 0)) {
    std::fprintf(stderr, "usage: %s N [empty]\n", argv[0]);
    return 2;
  }
  const bool empty = argc == 3;
  const long n = std::strtol(argv[1], nullptr, 10);
  if (n <= 0 || n > 100000) {
    std::fprintf(stderr, "N must be in 1..100000\n");
    return 2;
  }
  rvgl_emu_set_knob("RVGL_EMU_TRACE", "0");
  try {
    rvgl::bench::VirglHost host;
    rvgl::bench::ApiGuest guest(1, 1);
    guest.start();

    // Every request built beforehand (one command buffer of one NOP each), so the measured
    // window holds the library's work only.
    constexpr uint32_t kSlots = RVGL_RSP_AREA_SIZE / RVGL_MAX_RSP_SIZE;
    const long warm = 64;
    std::vector<std::vector<uint32_t>> bufs(static_cast<size_t>(n + warm));
    std::vector<rvgl_req_hdr> hdrs(bufs.size());
    for (size_t i = 0; i < bufs.size(); ++i) {
      hdrs[i] = {RVGL_CMD_NOP, sizeof(rvgl_req_nop), guest.next_seqno(),
                 static_cast<uint32_t>(i % kSlots) * RVGL_MAX_RSP_SIZE};
      bufs[i].resize(sizeof(rvgl_req_nop) / 4);
      rvgl_req_nop req{};
      req.hdr = hdrs[i];
      std::memcpy(bufs[i].data(), &req, sizeof(req));
    }
    auto submit = [&](size_t i) {
      return virgl_renderer_submit_cmd(bufs[i].data(), static_cast<int>(guest.ctx_id()),
                                       static_cast<int>(bufs[i].size()));
    };
    auto measured = [&](size_t i) {
      if (empty)
        return empty_submit(bufs[i].data(), static_cast<int>(guest.ctx_id()),
                            static_cast<int>(bufs[i].size()));
      return submit(i);
    };
    auto answered = [&](size_t i) {
      rvgl_rsp_hdr rsp;
      std::memcpy(&rsp, guest.response(hdrs[i].rsp_off), sizeof(rsp));
      return rsp.result == 0 && rsp.seqno == hdrs[i].seqno;
    };
    // First touches (lazy binding, the response slots' pages) belong to no call in steady state.
    for (long i = 0; i < warm; ++i)
      if (submit(static_cast<size_t>(i)) != 0 || !answered(static_cast<size_t>(i))) return 1;

    CALLGRIND_START_INSTRUMENTATION;
    CALLGRIND_ZERO_STATS;
    int bad = 0;
    for (long i = warm; i < warm + n; ++i) {
      CALLGRIND_TOGGLE_COLLECT;
      const int r = measured(static_cast<size_t>(i));
      CALLGRIND_TOGGLE_COLLECT;
      // Checked at once, outside the window: the response area has RVGL_RSP_AREA_SIZE /
      // RVGL_MAX_RSP_SIZE slots, so a later request reuses this one's slot.
      if (r != 0 || (!empty && !answered(static_cast<size_t>(i)))) bad = 1;
    }
    CALLGRIND_STOP_INSTRUMENTATION;
    if (bad) {
      std::fprintf(stderr, "a submit failed or a NOP was not answered with 0\n");
      return 1;
    }
  } catch (const std::exception &e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  std::printf("%ld single-NOP submits\n", n);
  return 0;
}
