#include <chrono>
#include <thread>

#include "exec/exec_context.h"

namespace rvgl::emu {

bool wait_compare(uint32_t function, uint32_t value, uint32_t reference, bool &result) {
  switch (function) {
    case 0:
      result = true;
      return true;  // always
    case 1:
      result = value < reference;
      return true;
    case 2:
      result = value <= reference;
      return true;
    case 3:
      result = value == reference;
      return true;
    case 4:
      result = value != reference;
      return true;
    case 5:
      result = value >= reference;
      return true;
    case 6:
      result = value > reference;
      return true;
    default:
      return false;
  }
}

ExecStatus poll_memory(ExecContext &cx, uint64_t va, uint32_t function, uint32_t reference,
                       uint32_t mask, uint64_t max_polls) {
  auto pause = std::chrono::microseconds(10);
  for (uint64_t n = 0;; ++n) {
    uint32_t v;
    if (!cx.mem.read32(va, v)) return ExecStatus::Fault;
    bool ok;
    if (!wait_compare(function, v & mask, reference, ok)) return ExecStatus::Illegal;
    if (ok) return ExecStatus::Ok;
    if (max_polls && n + 1 >= max_polls) return ExecStatus::Ok;
    if (cx.abort.load(std::memory_order_relaxed)) return ExecStatus::Aborted;
    if (SteadyClock::now() >= cx.lockup) return ExecStatus::Timeout;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(500));
  }
}

}  // namespace rvgl::emu
