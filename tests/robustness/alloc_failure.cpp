#include "robustness/alloc_failure.h"

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <execinfo.h>
#include <unistd.h>

#include "rvgl_emu.h"
#include "support/product_scope.h"
#include "support/replaced_new.h"

namespace rvgl::test::alloc {

namespace {

// Constant-initialised: operator new may run before any dynamic initialisation of a new thread.
struct Arming {
  bool armed = false;
  bool from_then_on = false;
  uint64_t nth = 0;
  Tally tally;
};
thread_local Arming t_arming;

bool refuse() noexcept {
  Arming &a = t_arming;
  if (!a.armed || product_call_depth == 0 || rvgl_emu_thread_in_kernel()) return false;
  const uint64_t n = ++a.tally.counted;
  if (!a.nth || n < a.nth || (n > a.nth && !a.from_then_on)) return false;
  ++a.tally.failed;
  // RVGL_ALLOC_SWEEP_TRACE=1: where each refused allocation was asked for (symbols need the
  // binary's exported symbols; addr2line takes the rest).
  static const bool trace = std::getenv("RVGL_ALLOC_SWEEP_TRACE");
  if (trace) {
    void *frames[24];
    const int n_frames = backtrace(frames, 24);
    dprintf(2, "refused allocation %llu:\n", static_cast<unsigned long long>(n));
    backtrace_symbols_fd(frames, n_frames, 2);
  }
  return true;
}

}  // namespace

void arm(uint64_t nth, bool from_then_on) {
  t_arming = Arming{true, from_then_on, nth, {}};
}

Tally disarm() {
  const Tally t = t_arming.tally;
  t_arming = Arming{};
  return t;
}

}  // namespace rvgl::test::alloc

void *rvgl::test::replaced_allocate(std::size_t size, std::size_t align) noexcept {
  return alloc::refuse() ? nullptr : malloc_aligned(size, align);
}
