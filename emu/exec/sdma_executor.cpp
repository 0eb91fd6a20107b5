// The SDMA engine: linear copies, writes, fills, fences and memory polls through the job's VM.
#include <vector>

#include "exec/exec_context.h"
#include "exec/sdma_packets.h"
#include "util/clock.h"

namespace rvgl::emu {

namespace {

using namespace sdma;

uint64_t addr64(uint32_t lo, uint32_t hi) {
  return lo | (static_cast<uint64_t>(hi) << 32);
}

}  // namespace

ExecStatus run_sdma_ib(ExecContext &cx, uint64_t va, uint64_t dwords, int level) {
  if (dwords > kMaxIbDwords) return ExecStatus::Illegal;
  if (dwords > cx.budget_dwords) return ExecStatus::Timeout;
  std::vector<uint32_t> buf(static_cast<size_t>(dwords));
  if (!cx.mem.read(va, buf.data(), dwords * 4)) return ExecStatus::Fault;
  return run_sdma(cx, buf.data(), buf.size(), level);
}

ExecStatus run_sdma(ExecContext &cx, const uint32_t *dw, size_t n, int level) {
  const SdmaLimits &lim = cx.profile.sdma_limits;
  size_t i = 0;
  while (i < n) {
    if (cx.budget_dwords == 0) return ExecStatus::Timeout;
    --cx.budget_dwords;
    if (cx.abort.load(std::memory_order_relaxed)) return ExecStatus::Aborted;
    const uint32_t h = dw[i];
    const uint32_t *p = dw + i;
    const size_t left = n - i;
    size_t len = 0;
    ExecStatus st = ExecStatus::Ok;
    auto need = [&](size_t k) { return (len = k) <= left; };
    switch (op(h)) {
      case OP_NOP:
        if (!need(1 + nop_count(h))) return ExecStatus::Illegal;
        break;
      case OP_COPY: {
        if (sub_op(h) != SUBOP_COPY_LINEAR || (h & kCopyBroadcast)) return ExecStatus::Illegal;
        if (!need(kCopyLinearDwords)) return ExecStatus::Illegal;
        const uint64_t bytes = static_cast<uint64_t>(p[1] & lim.copy_count_mask) + 1;
        if (!cx.mem.copy(addr64(p[5], p[6]), addr64(p[3], p[4]), bytes)) st = ExecStatus::Fault;
        break;
      }
      case OP_WRITE: {
        if (sub_op(h) != SUBOP_WRITE_LINEAR || !need(kWriteHeaderDwords))
          return ExecStatus::Illegal;
        const size_t ndw = static_cast<size_t>(p[3] & lim.write_count_mask) + 1;
        if (!need(kWriteHeaderDwords + ndw)) return ExecStatus::Illegal;
        const uint64_t dst = addr64(p[1], p[2]);
        if (dst & 3) return ExecStatus::Illegal;
        if (!cx.mem.write(dst, p + kWriteHeaderDwords, ndw * 4)) st = ExecStatus::Fault;
        break;
      }
      case OP_INDIRECT: {
        if (!need(kIndirectDwords) || level >= 1) return ExecStatus::Illegal;
        st = run_sdma_ib(cx, addr64(p[1] & ~31u, p[2]), p[3] & kIbSizeMask, level + 1);
        break;
      }
      case OP_FENCE: {
        if (!need(kFenceDwords)) return ExecStatus::Illegal;
        const uint64_t addr = addr64(p[1], p[2]);
        if (addr & 3) return ExecStatus::Illegal;
        if (!cx.mem.write32(addr, p[3])) st = ExecStatus::Fault;
        break;
      }
      case OP_TRAP:
        if (!need(kTrapDwords)) return ExecStatus::Illegal;
        break;  // an interrupt; completion is reported through the fence anyway
      case OP_POLL_REGMEM: {
        if (!need(kPollRegmemDwords)) return ExecStatus::Illegal;
        bool dummy;
        if (!wait_compare(poll_func(h), 0, 0, dummy)) return ExecStatus::Illegal;
        if (!poll_mem(h)) break;  // register polls are taken as satisfied
        const uint32_t retry = poll_retry(p[5]);
        st = poll_memory(cx, addr64(p[1] & ~3u, p[2]), poll_func(h), p[3], p[4],
                         retry == kPollRetryForever ? 0 : uint64_t{retry} + 1);
        break;
      }
      case OP_CONST_FILL: {
        if (!need(kConstFillDwords)) return ExecStatus::Illegal;
        const uint32_t log2 = fill_size_log2(h);
        if (log2 > 2) return ExecStatus::Illegal;
        const uint64_t bytes = static_cast<uint64_t>(p[4] & lim.fill_count_mask) + 1;
        if (!cx.mem.fill(addr64(p[1], p[2]), p[3], 1u << log2, bytes)) st = ExecStatus::Fault;
        break;
      }
      case OP_TIMESTAMP: {
        if (!need(kTimestampDwords)) return ExecStatus::Illegal;
        if (sub_op(h) == SUBOP_TIMESTAMP_SET) break;
        if (sub_op(h) != SUBOP_TIMESTAMP_GET && sub_op(h) != SUBOP_TIMESTAMP_GET_GLOBAL)
          return ExecStatus::Illegal;
        if (!cx.mem.write64(addr64(p[1] & ~7u, p[2]), gpu_clock_ticks())) st = ExecStatus::Fault;
        break;
      }
      default:
        return ExecStatus::Illegal;
    }
    if (st != ExecStatus::Ok) return st;
    i += len;
  }
  return ExecStatus::Ok;
}

}  // namespace rvgl::emu
