// A VMM in miniature for the in-process benchmarks: initialises virglrenderer through the
// definitions this executable resolves (our library in front of the real one), and keeps, per
// context and ring, the last context fence the renderer delivered and when it arrived.
//
// Fences come with VIRGL_RENDERER_ASYNC_FENCE_CB, from the completion engine's thread (what QEMU
// does with an EGL display and virglrenderer >= 1.1.2); or, in poll mode, on the waiting thread
// itself, which sleeps in poll() on the context's poll fd and calls virgl_renderer_context_poll
// when it turns readable (what vtest and crosvm do).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>

#include "virgl_api.h"

namespace rvgl::bench {

class VirglHost {
 public:
  static constexpr uint32_t kMaxContexts = 128;
  static constexpr uint32_t kRings = 64;

  enum class Delivery { kAsync, kPoll };
  explicit VirglHost(Delivery d = Delivery::kAsync);  // throws when virgl_renderer_init fails
  ~VirglHost();
  VirglHost(const VirglHost &) = delete;
  VirglHost &operator=(const VirglHost &) = delete;

  // Blocks until fence `id` (or a later one) of (ctx, ring) was delivered; false on timeout.
  bool wait_fence(uint32_t ctx, uint32_t ring, uint64_t id, int timeout_ms = 10000);
  uint64_t last_fence(uint32_t ctx, uint32_t ring) const {
    return slot(ctx, ring).id.load(std::memory_order_acquire);
  }
  // CLOCK_MONOTONIC ns at which the last fence of (ctx, ring) reached write_context_fence.
  uint64_t last_fence_ns(uint32_t ctx, uint32_t ring) const {
    return slot(ctx, ring).ns.load(std::memory_order_acquire);
  }

 private:
  struct Slot {
    std::atomic<uint64_t> id{0};
    std::atomic<uint64_t> ns{0};
  };
  Slot &slot(uint32_t ctx, uint32_t ring) {
    return slots_[(ctx % kMaxContexts) * kRings + ring % kRings];
  }
  const Slot &slot(uint32_t ctx, uint32_t ring) const {
    return slots_[(ctx % kMaxContexts) * kRings + ring % kRings];
  }
  void on_fence(uint32_t ctx, uint32_t ring, uint64_t id);

  bool poll_wait(const Slot &s, uint32_t ctx, uint64_t id, int timeout_ms);

  Delivery delivery_;
  virgl_renderer_callbacks cbs_{};
  std::unique_ptr<Slot[]> slots_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<int> waiters_{0};
};

}  // namespace rvgl::bench
