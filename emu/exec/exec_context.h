// What a packet executor needs while it runs one job or one batch of a user queue's ring.
#pragma once

#include <atomic>
#include <cstdint>

#include "config/device_profile.h"
#include "exec/gpu_memory.h"
#include "util/clock.h"

namespace rvgl::emu {

enum class ExecStatus {
  Ok,
  Fault,    // a VM fault (recorded in GpuMemory)
  Illegal,  // an unknown or malformed packet: the engine would hang on it
  Timeout,  // a wait that never came true, or a runaway IB chain
  Aborted,  // the device is shutting down
};

// The ring packet that calls an IB has a 20-bit IB_SIZE field (nvd.h INDIRECT_BUFFER, SDMA
// INDIRECT): no IB is longer.
inline constexpr uint64_t kMaxIbDwords = (1u << 20) - 1;

struct ExecContext {
  GpuMemory &mem;
  const DeviceProfile &profile;
  Deadline lockup;                      // when a stuck wait counts as a hang
  const std::atomic<bool> &abort;       // set when the worker must stop
  uint64_t budget_dwords = 1ull << 26;  // packets executed before a chain counts as a hang
};

// Runs a packet stream fetched from GPU memory or taken from a ring. `level` is the IB nesting
// level: 0 for a ring, 1 for an IB the kernel calls, 2 for an IB called from that one.
ExecStatus run_pm4(ExecContext &cx, const uint32_t *dw, size_t n, int level);
ExecStatus run_pm4_ib(ExecContext &cx, uint64_t va, uint64_t dwords, int level);
ExecStatus run_sdma(ExecContext &cx, const uint32_t *dw, size_t n, int level);
ExecStatus run_sdma_ib(ExecContext &cx, uint64_t va, uint64_t dwords, int level);

// The comparison WAIT_REG_MEM and SDMA POLL_REGMEM apply (function codes 0..6 of nvd.h).
// Returns false for a reserved code.
bool wait_compare(uint32_t function, uint32_t value, uint32_t reference, bool &result);

// Polls a dword in GPU memory until (value & mask) compares true, the lockup deadline passes
// (Timeout) or, with max_polls != 0, that many polls have been made (Ok).
ExecStatus poll_memory(ExecContext &cx, uint64_t va, uint32_t function, uint32_t reference,
                       uint32_t mask, uint64_t max_polls);

}  // namespace rvgl::emu
