#include "virgl_host.h"

#include <poll.h>

#include <cerrno>
#include <chrono>
#include <stdexcept>
#include <string>

#include "clock.h"

namespace rvgl::bench {

VirglHost::VirglHost(Delivery d) : delivery_(d), slots_(new Slot[kMaxContexts * kRings]) {
  cbs_.version = 3;
  cbs_.write_fence = [](void *, uint32_t) {};
  cbs_.write_context_fence = [](void *cookie, uint32_t ctx, uint32_t ring, uint64_t id) {
    static_cast<VirglHost *>(cookie)->on_fence(ctx, ring, id);
  };
  const int flags = VIRGL_RENDERER_NO_VIRGL | VIRGL_RENDERER_THREAD_SYNC |
                    (d == Delivery::kAsync ? VIRGL_RENDERER_ASYNC_FENCE_CB : 0);
  if (int r = virgl_renderer_init(this, flags, &cbs_))
    throw std::runtime_error("virgl_renderer_init: " + std::to_string(r));
}

VirglHost::~VirglHost() {
  virgl_renderer_cleanup(this);
}

void VirglHost::on_fence(uint32_t ctx, uint32_t ring, uint64_t id) {
  Slot &s = slot(ctx, ring);
  s.ns.store(now_ns(), std::memory_order_relaxed);
  // seq_cst on id and waiters_ (both sides): either the waiter sees the id or we see the waiter.
  s.id.store(id);
  if (waiters_.load()) {
    // The lock orders the store with a waiter's check of it; the notify comes after it is
    // released, or the woken waiter would block on mu_ at once and be woken a second time (as a
    // VMM, which only sets an event notifier here, would not be).
    { std::lock_guard lk(mu_); }
    cv_.notify_all();
  }
}

bool VirglHost::poll_wait(const Slot &s, uint32_t ctx, uint64_t id, int timeout_ms) {
  const int fd = virgl_renderer_context_get_poll_fd(ctx);
  if (fd < 0) return false;
  const uint64_t deadline = now_ns() + static_cast<uint64_t>(timeout_ms) * 1'000'000;
  while (s.id.load(std::memory_order_acquire) < id) {
    const uint64_t now = now_ns();
    if (now >= deadline) return false;
    pollfd p{fd, POLLIN, 0};
    const int left_ms = static_cast<int>((deadline - now + 999'999) / 1'000'000);
    if (::poll(&p, 1, left_ms) < 0 && errno != EINTR) return false;
    virgl_renderer_context_poll(ctx);  // the callback runs here, on this thread
  }
  return true;
}

bool VirglHost::wait_fence(uint32_t ctx, uint32_t ring, uint64_t id, int timeout_ms) {
  const Slot &s = slot(ctx, ring);
  if (s.id.load(std::memory_order_acquire) >= id) return true;
  if (delivery_ == Delivery::kPoll) return poll_wait(s, ctx, id, timeout_ms);
  std::unique_lock lk(mu_);
  waiters_.fetch_add(1);
  const bool ok =
      cv_.wait_for(lk, std::chrono::milliseconds(timeout_ms), [&] { return s.id.load() >= id; });
  waiters_.fetch_sub(1);
  return ok;
}

}  // namespace rvgl::bench
