#include "virgl_host.h"

#include <chrono>
#include <stdexcept>
#include <string>

#include "clock.h"

namespace rvgl::bench {

VirglHost::VirglHost() : slots_(new Slot[kMaxContexts * kRings]) {
  cbs_.version = 3;
  cbs_.write_fence = [](void *, uint32_t) {};
  cbs_.write_context_fence = [](void *cookie, uint32_t ctx, uint32_t ring, uint64_t id) {
    static_cast<VirglHost *>(cookie)->on_fence(ctx, ring, id);
  };
  const int flags =
      VIRGL_RENDERER_NO_VIRGL | VIRGL_RENDERER_THREAD_SYNC | VIRGL_RENDERER_ASYNC_FENCE_CB;
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
    std::lock_guard lk(mu_);
    cv_.notify_all();
  }
}

bool VirglHost::wait_fence(uint32_t ctx, uint32_t ring, uint64_t id, int timeout_ms) {
  const Slot &s = slot(ctx, ring);
  if (s.id.load(std::memory_order_acquire) >= id) return true;
  std::unique_lock lk(mu_);
  waiters_.fetch_add(1);
  const bool ok =
      cv_.wait_for(lk, std::chrono::milliseconds(timeout_ms), [&] { return s.id.load() >= id; });
  waiters_.fetch_sub(1);
  return ok;
}

}  // namespace rvgl::bench
