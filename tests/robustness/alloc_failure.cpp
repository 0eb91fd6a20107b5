#include "robustness/alloc_failure.h"

#include <execinfo.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>

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

// RVGL_ALLOC_SWEEP_TRACE=1: where each refused allocation was asked for (symbols need the
// binary's exported symbols; addr2line takes the rest).
void trace_refusal(uint64_t n) noexcept {
  static const bool trace = std::getenv("RVGL_ALLOC_SWEEP_TRACE");
  if (!trace) return;
  void *frames[24];
  const int n_frames = backtrace(frames, 24);
  dprintf(2, "refused allocation %llu:\n", static_cast<unsigned long long>(n));
  backtrace_symbols_fd(frames, n_frames, 2);
}

// Whether the nth counted allocation is refused, of those armed to refuse the nth (0: none, only
// counting) or, from_then_on, the nth and every later one.
bool refused_at(uint64_t n, uint64_t nth, bool from_then_on) {
  return nth && n >= nth && (n == nth || from_then_on);
}

// refuse_on_thread()'s settings, read by every thread's allocations: all atomics (the name as two
// words), so arming again while a thread reads them is no data race.
struct ThreadRefusal {
  std::atomic<bool> on{false};
  std::atomic<uint64_t> name[2] = {};
  std::atomic<uint64_t> nth{1}, counted{0}, failed{0};
  std::atomic<bool> from_then_on{false};
};
ThreadRefusal g_thread_refusal;

bool refuse_on_named_thread() noexcept {
  ThreadRefusal &r = g_thread_refusal;
  if (!r.on.load(std::memory_order_acquire)) return false;
  if (test_callback_depth || product_call_depth || rvgl_emu_thread_in_kernel()) return false;
  uint64_t name[2] = {};
  if (prctl(PR_GET_NAME, reinterpret_cast<char *>(name)) != 0) return false;
  if (name[0] != r.name[0].load(std::memory_order_relaxed) ||
      name[1] != r.name[1].load(std::memory_order_relaxed))
    return false;
  const uint64_t n = r.counted.fetch_add(1, std::memory_order_relaxed) + 1;
  if (!refused_at(n, r.nth.load(std::memory_order_relaxed),
                  r.from_then_on.load(std::memory_order_relaxed)))
    return false;
  r.failed.fetch_add(1, std::memory_order_relaxed);
  trace_refusal(n);
  return true;
}

bool refuse() noexcept {
  if (refuse_on_named_thread()) return true;
  Arming &a = t_arming;
  if (!a.armed || product_call_depth == 0 || rvgl_emu_thread_in_kernel()) return false;
  const uint64_t n = ++a.tally.counted;
  if (!refused_at(n, a.nth, a.from_then_on)) return false;
  ++a.tally.failed;
  trace_refusal(n);
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

void refuse_on_thread(const char *thread_name, uint64_t nth, bool from_then_on) {
  ThreadRefusal &r = g_thread_refusal;
  r.on.store(false, std::memory_order_release);
  uint64_t name[2] = {};  // as PR_GET_NAME gives it: at most 15 bytes and a terminating zero
  std::memcpy(name, thread_name, std::min<size_t>(std::strlen(thread_name), 15));
  r.name[0].store(name[0], std::memory_order_relaxed);
  r.name[1].store(name[1], std::memory_order_relaxed);
  r.nth.store(nth, std::memory_order_relaxed);
  r.from_then_on.store(from_then_on, std::memory_order_relaxed);
  r.counted.store(0, std::memory_order_relaxed);
  r.failed.store(0, std::memory_order_relaxed);
  r.on.store(true, std::memory_order_release);
}

Tally stop_refusing_on_thread() {
  ThreadRefusal &r = g_thread_refusal;
  r.on.store(false, std::memory_order_release);
  return {r.counted.load(std::memory_order_relaxed), r.failed.load(std::memory_order_relaxed)};
}

}  // namespace rvgl::test::alloc

void *rvgl::test::replaced_allocate(std::size_t size, std::size_t align) noexcept {
  return alloc::refuse() ? nullptr : malloc_aligned(size, align);
}
