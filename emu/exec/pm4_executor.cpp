// The compute/GFX command processor: PM4 type-3 packets, each translated through the job's VM.
#include <unistd.h>

#include <cstdio>
#include <vector>

#include "core/runtime_knobs.h"
#include "exec/exec_context.h"
#include "exec/pm4_packets.h"
#include "util/clock.h"

namespace rvgl::emu {

namespace {

using namespace pm4;

uint64_t addr64(uint32_t lo, uint32_t hi) {
  return lo | (static_cast<uint64_t>(hi) << 32);
}

ExecStatus fetch(ExecContext &cx, uint64_t va, uint64_t dwords, std::vector<uint32_t> &out) {
  if (dwords > kMaxIbDwords) return ExecStatus::Illegal;
  if (dwords > cx.budget_dwords) return ExecStatus::Timeout;
  out.resize(static_cast<size_t>(dwords));
  if (!cx.mem.read(va, out.data(), dwords * 4)) return ExecStatus::Fault;
  return ExecStatus::Ok;
}

ExecStatus write_data(ExecContext &cx, const uint32_t *b, size_t body) {
  if (body < 3) return ExecStatus::Illegal;
  const uint32_t dst = write_data_dst_sel(b[0]);
  const uint64_t addr = addr64(b[1], b[2]);
  const uint32_t *data = b + 3;
  const size_t ndw = body - 3;
  switch (dst) {
    case DST_REG:
      return ExecStatus::Ok;  // register state has no effect without shaders
    case DST_MEM_GRBM:
    case DST_TC_L2:
    case DST_MEM:
      break;
    default:
      return ExecStatus::Illegal;
  }
  if (addr & 3) return ExecStatus::Illegal;
  if (b[0] & kWriteDataOneAddr) {
    for (size_t i = 0; i < ndw; ++i)
      if (!cx.mem.write32(addr, data[i])) return ExecStatus::Fault;
    return ExecStatus::Ok;
  }
  return cx.mem.write(addr, data, ndw * 4) ? ExecStatus::Ok : ExecStatus::Fault;
}

ExecStatus release_mem(ExecContext &cx, const uint32_t *b, size_t body) {
  // GFX9+ RELEASE_MEM has 7 body dwords (the last is the interrupt context id).
  if (body < 6) return ExecStatus::Illegal;
  if (release_mem_dst_sel(b[1]) > 1) return ExecStatus::Illegal;
  const uint64_t addr = addr64(b[2], b[3]);
  switch (release_mem_data_sel(b[1])) {
    case DATA_NONE:
      return ExecStatus::Ok;
    case DATA_LOW32:
      if (addr & 3) return ExecStatus::Illegal;
      return cx.mem.write32(addr, b[4]) ? ExecStatus::Ok : ExecStatus::Fault;
    case DATA_64:
      if (addr & 7) return ExecStatus::Illegal;
      return cx.mem.write64(addr, addr64(b[4], b[5])) ? ExecStatus::Ok : ExecStatus::Fault;
    case DATA_GPU_CLOCK:
    case DATA_SYS_CLOCK:
      if (addr & 7) return ExecStatus::Illegal;
      return cx.mem.write64(addr, gpu_clock_ticks()) ? ExecStatus::Ok : ExecStatus::Fault;
    default:
      return ExecStatus::Illegal;
  }
}

ExecStatus dma_data(ExecContext &cx, const uint32_t *b, size_t body) {
  if (body < 6) return ExecStatus::Illegal;
  const uint32_t ctl = b[0], cmd = b[5];
  const uint32_t src_sel = dma_data_src_sel(ctl), dst_sel = dma_data_dst_sel(ctl);
  const uint64_t src = addr64(b[1], b[2]), dst = addr64(b[3], b[4]);
  const uint64_t bytes = cmd & kDmaDataByteCountMask;
  if (src_sel == SEL_GDS || dst_sel == SEL_GDS) return ExecStatus::Illegal;
  // DST_SEL NOWHERE (sid.h V_411_NOWHERE): a prefetch into L2 (RADV's cp_dma_prefetch).
  if (dst_sel == SEL_NOWHERE) return ExecStatus::Ok;
  if (bytes == 0 || (cmd & kDmaDataDas)) return ExecStatus::Ok;  // nothing, or a register target
  if (src_sel == SEL_DATA) {
    if (cmd & kDmaDataDaic) return cx.mem.write32(dst, b[1]) ? ExecStatus::Ok : ExecStatus::Fault;
    return cx.mem.fill(dst, b[1], 4, bytes) ? ExecStatus::Ok : ExecStatus::Fault;
  }
  if (cmd & kDmaDataSas) return ExecStatus::Illegal;  // register sources are not emulated
  if (cmd & (kDmaDataSaic | kDmaDataDaic)) {
    // Non-incrementing addresses move dword by dword.
    for (uint64_t off = 0; off < bytes; off += 4) {
      uint32_t v;
      const uint64_t s = (cmd & kDmaDataSaic) ? src : src + off;
      const uint64_t d = (cmd & kDmaDataDaic) ? dst : dst + off;
      if (!cx.mem.read32(s, v) || !cx.mem.write32(d, v)) return ExecStatus::Fault;
    }
    return ExecStatus::Ok;
  }
  return cx.mem.copy(dst, src, bytes) ? ExecStatus::Ok : ExecStatus::Fault;
}

// COPY_DATA between memory, immediates and the GPU clock. A register destination is a register
// write (absorbed); a register, counter or GDS source has no value to give here.
ExecStatus copy_data(ExecContext &cx, const uint32_t *b, size_t body) {
  if (body < 5) return ExecStatus::Illegal;
  const uint32_t ctl = b[0];
  const bool wide = ctl & kCopyDataCount64;
  const uint32_t dst_sel = copy_data_dst_sel(ctl);
  if (dst_sel == COPY_REG || dst_sel == COPY_PERF) return ExecStatus::Ok;
  if (dst_sel != DST_MEM_GRBM && dst_sel != COPY_TC_L2 && dst_sel != COPY_DST_MEM)
    return ExecStatus::Illegal;
  uint64_t value = 0;
  switch (copy_data_src_sel(ctl)) {
    case COPY_IMM:
      value = wide ? addr64(b[1], b[2]) : b[1];
      break;
    case COPY_SRC_MEM:
    case COPY_TC_L2: {
      const uint64_t src = addr64(b[1], b[2]);
      if (src & (wide ? 7 : 3)) return ExecStatus::Illegal;
      if (wide) {
        if (!cx.mem.read(src, &value, 8)) return ExecStatus::Fault;
      } else {
        uint32_t v32;
        if (!cx.mem.read32(src, v32)) return ExecStatus::Fault;
        value = v32;
      }
      break;
    }
    case COPY_TIMESTAMP:
      value = gpu_clock_ticks();
      break;
    default:
      return ExecStatus::Illegal;
  }
  const uint64_t dst = addr64(b[3], b[4]);
  if (dst & (wide ? 7 : 3)) return ExecStatus::Illegal;
  const bool ok = wide ? cx.mem.write64(dst, value) : cx.mem.write32(dst, uint32_t(value));
  return ok ? ExecStatus::Ok : ExecStatus::Fault;
}

// RVGL_EMU_TRACE: say which packet failed the job (what a hang dump would point at).
ExecStatus refuse(uint32_t op, const char *why) {
  if (knobs().trace.load(std::memory_order_relaxed))
    std::fprintf(stderr, "rvgl-emu[%d]: PM4 opcode 0x%02x %s: the job fails\n", int(getpid()), op,
                 why);
  return ExecStatus::Illegal;
}

ExecStatus wait_reg_mem(ExecContext &cx, const uint32_t *b, size_t body) {
  if (body < 6) return ExecStatus::Illegal;
  const uint32_t fn = wait_function(b[0]);
  bool dummy;
  if (!wait_compare(fn, 0, 0, dummy)) return ExecStatus::Illegal;
  if (wait_mem_space(b[0]) != 1) return ExecStatus::Ok;  // register polls are taken as satisfied
  const uint64_t addr = addr64(b[1] & ~3u, b[2]);
  return poll_memory(cx, addr, fn, b[3], b[4], 0);
}

}  // namespace

ExecStatus run_pm4_ib(ExecContext &cx, uint64_t va, uint64_t dwords, int level) {
  std::vector<uint32_t> buf;
  if (ExecStatus st = fetch(cx, va, dwords, buf); st != ExecStatus::Ok) return st;
  return run_pm4(cx, buf.data(), buf.size(), level);
}

ExecStatus run_pm4(ExecContext &cx, const uint32_t *dw, size_t n, int level) {
  std::vector<uint32_t> chained;  // the IB a CHAIN packet switched to
  size_t i = 0;
  while (i < n) {
    if (cx.budget_dwords == 0) return ExecStatus::Timeout;
    --cx.budget_dwords;
    if (cx.abort.load(std::memory_order_relaxed)) return ExecStatus::Aborted;
    const uint32_t h = dw[i];
    if (header_type(h) == kType2Nop) {
      ++i;
      continue;
    }
    if (header_type(h) != kType3) return refuse(h, "(not a type-3 header)");
    const uint32_t op = header_opcode(h);
    const uint32_t count = header_count(h);
    const size_t body = (op == NOP && count == kOneDwordNopCount) ? 0 : count + 1;
    if (body > n - i - 1) return refuse(op, "runs past the end of its buffer");
    const uint32_t *b = dw + i + 1;
    ExecStatus st = ExecStatus::Ok;
    switch (op) {
      case NOP:
        break;
      case WRITE_DATA:
        st = write_data(cx, b, body);
        break;
      case RELEASE_MEM:
        st = release_mem(cx, b, body);
        break;
      case DMA_DATA:
        st = dma_data(cx, b, body);
        break;
      case COPY_DATA:
        st = copy_data(cx, b, body);
        break;
      case WAIT_REG_MEM:
        st = wait_reg_mem(cx, b, body);
        break;
      case EVENT_WRITE:
      case ACQUIRE_MEM:
        // Cache flushes and pipeline events: memory is coherent here, nothing to do.
        if (body < 1) st = ExecStatus::Illegal;
        break;
      case INDIRECT_BUFFER:
      case INDIRECT_BUFFER_CNST: {
        if (body < 3) return ExecStatus::Illegal;
        const uint64_t va = addr64(b[0] & ~3u, b[1] & 0xffff);
        const uint64_t size = b[2] & kIbSizeMask;
        if (b[2] & kIbChain) {
          // The rest of this buffer is abandoned; execution continues in the new one.
          std::vector<uint32_t> next;
          if (ExecStatus s = fetch(cx, va, size, next); s != ExecStatus::Ok) return s;
          chained.swap(next);
          dw = chained.data();
          n = chained.size();
          i = 0;
          continue;
        }
        if (level >= 2) return ExecStatus::Illegal;  // the CP nests IB1 -> IB2 only
        st = run_pm4_ib(cx, va, size, level + 1);
        break;
      }
      default:
        if (is_register_state(op)) break;  // register writes: nothing to execute
        return refuse(op, needs_shaders(op) ? "needs shaders" : "is not emulated");
    }
    if (st == ExecStatus::Illegal) return refuse(op, "is malformed");
    if (st != ExecStatus::Ok) return st;
    i += 1 + body;
  }
  return ExecStatus::Ok;
}

}  // namespace rvgl::emu
