#include "robustness/alloc_failure.h"

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <execinfo.h>
#include <unistd.h>
#include <new>

#include "rvgl_emu.h"
#include "support/product_scope.h"

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

void *allocate(std::size_t size, std::size_t align) noexcept {
  if (refuse()) return nullptr;
  if (size == 0) size = 1;
  if (align <= alignof(std::max_align_t)) return std::malloc(size);
  void *p = nullptr;
  return posix_memalign(&p, align, size) == 0 ? p : nullptr;
}

void *allocate_or_throw(std::size_t size, std::size_t align) {
  if (void *p = allocate(size, align)) return p;
  throw std::bad_alloc();
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

using rvgl::test::alloc::allocate;
using rvgl::test::alloc::allocate_or_throw;

// The replaceable forms ([new.delete]): every one an allocation of the product could reach.
void *operator new(std::size_t n) {
  return allocate_or_throw(n, 0);
}
void *operator new[](std::size_t n) {
  return allocate_or_throw(n, 0);
}
void *operator new(std::size_t n, std::align_val_t a) {
  return allocate_or_throw(n, static_cast<std::size_t>(a));
}
void *operator new[](std::size_t n, std::align_val_t a) {
  return allocate_or_throw(n, static_cast<std::size_t>(a));
}
void *operator new(std::size_t n, const std::nothrow_t &) noexcept {
  return allocate(n, 0);
}
void *operator new[](std::size_t n, const std::nothrow_t &) noexcept {
  return allocate(n, 0);
}
void *operator new(std::size_t n, std::align_val_t a, const std::nothrow_t &) noexcept {
  return allocate(n, static_cast<std::size_t>(a));
}
void *operator new[](std::size_t n, std::align_val_t a, const std::nothrow_t &) noexcept {
  return allocate(n, static_cast<std::size_t>(a));
}
void operator delete(void *p) noexcept {
  std::free(p);
}
void operator delete[](void *p) noexcept {
  std::free(p);
}
void operator delete(void *p, std::size_t) noexcept {
  std::free(p);
}
void operator delete[](void *p, std::size_t) noexcept {
  std::free(p);
}
void operator delete(void *p, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete[](void *p, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete(void *p, std::size_t, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete[](void *p, std::size_t, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete(void *p, const std::nothrow_t &) noexcept {
  std::free(p);
}
void operator delete[](void *p, const std::nothrow_t &) noexcept {
  std::free(p);
}
void operator delete(void *p, std::align_val_t, const std::nothrow_t &) noexcept {
  std::free(p);
}
void operator delete[](void *p, std::align_val_t, const std::nothrow_t &) noexcept {
  std::free(p);
}
