// A VMM in miniature: the callbacks, flags and call sequence of one real VMM, replayed against
// our library in front of the real libvirglrenderer, on the emulated GPU. Every profile names
// the VMM source it follows. What the VMM learns of a fence is recorded together with the
// emulator's job-completion record at that moment, so a test can tell whether a fence retired
// before the work submitted ahead of it (issue 15).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "rvgl_emu.h"
#include "virgl_api.h"

namespace rvgl::hooks_test {

struct VmmProfile {
  const char *name;
  int callbacks_version;
  int flags;                 // what the VMM passes to virgl_renderer_init
  bool write_context_fence;  // the VMM's struct has it (QEMU 10.0's version 4 struct does not)
  bool ring_fences;          // guest fences with ring_idx go to context_create_fence
  uint32_t capset;           // the capset id the guest creates its ROCM context with
  const char *capset_env;    // RVGL_CAPSET_ID for this profile (null: default 8)
  bool legacy_context;       // the guest kernel's own context (virgl_renderer_context_create)
  bool submit_cmd2;          // crosvm's rutabaga
  bool crosvm_blob_probe;    // export_blob + get_map_info + execute(export query) per blob
  bool qemu_blob_probe;      // resource_get_info (and map) per blob, as QEMU's create_blob does
  bool async() const { return flags & VIRGL_RENDERER_ASYNC_FENCE_CB; }
};

// One fence as the VMM saw it retire.
struct Retired {
  uint32_t ctx_id;  // 0 for a global fence
  uint32_t ring_idx;
  uint64_t fence_id;
  uint64_t jobs_completed;  // the emulator's count when the VMM was told
};

class MiniVmm {
 public:
  explicit MiniVmm(const VmmProfile &p) : p_(p) {
    cbs_.version = p.callbacks_version;
    cbs_.write_fence = [](void *cookie, uint32_t fence) {
      static_cast<MiniVmm *>(cookie)->record(0, 0, fence);
    };
    if (p.callbacks_version >= 3 && p.write_context_fence)
      cbs_.write_context_fence = [](void *cookie, uint32_t ctx, uint32_t ring, uint64_t id) {
        static_cast<MiniVmm *>(cookie)->record(ctx, ring, id);
      };
    result_ = virgl_renderer_init(this, p.flags, &cbs_);
  }
  ~MiniVmm() { virgl_renderer_cleanup(this); }
  MiniVmm(const MiniVmm &) = delete;
  MiniVmm &operator=(const MiniVmm &) = delete;

  int result() const { return result_; }
  const VmmProfile &profile() const { return p_; }

  // A guest fence as the VMM turns it into a renderer call (QEMU's
  // virtio_gpu_virgl_process_cmd; crosvm's rutabaga create_fence).
  // QEMU queues the fenced command only after the call returns (virtio_gpu_process_cmdq), so
  // without ASYNC_FENCE_CB (which QEMU defers to a bottom half) a fence written from inside the
  // call would be lost: such writes are counted (written_inside_create).
  int fence(uint32_t ctx_id, uint32_t ring_idx, uint64_t fence_id) {
    in_create_ = true;
    int r;
    if (p_.ring_fences)
      r = virgl_renderer_context_create_fence(ctx_id, VIRGL_RENDERER_FENCE_FLAG_MERGEABLE, ring_idx,
                                              fence_id);
    else  // QEMU <= 10.0 passes the command type as ctx_id; 10.1+ and crosvm pass 0 / the context
      r = virgl_renderer_create_fence(static_cast<int>(fence_id), 0);
    in_create_ = false;
    return r;
  }
  int written_inside_create() const {
    std::lock_guard lk(mu_);
    return written_inside_create_;
  }

  // The VMM's side of delivery until `done()` or the deadline: QEMU's fence-poll timer calls
  // virgl_renderer_poll (virtio_gpu_fence_poll, 10 ms; 1 ms here to keep the test short); with
  // ASYNC_FENCE_CB fences come from the library's threads and QEMU still polls on its timer.
  template <class Done>
  bool run_until(Done &&done, std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
    const auto end = std::chrono::steady_clock::now() + timeout;
    while (!done()) {
      if (std::chrono::steady_clock::now() > end) return false;
      virgl_renderer_poll();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return true;
  }

  std::vector<Retired> retired() const {
    std::lock_guard lk(mu_);
    return retired_;
  }
  bool has(uint32_t ctx, uint32_t ring, uint64_t id) const {
    std::lock_guard lk(mu_);
    for (const auto &r : retired_)
      if (r.ctx_id == ctx && r.ring_idx == ring && r.fence_id >= id) return true;
    return false;
  }
  // The newest global fence id written, 0 if none.
  uint64_t newest_global() const {
    std::lock_guard lk(mu_);
    uint64_t n = 0;
    for (const auto &r : retired_)
      if (r.ctx_id == 0 && r.fence_id > n) n = r.fence_id;
    return n;
  }
  std::vector<std::thread::id> threads() const {
    std::lock_guard lk(mu_);
    return threads_;
  }

  // Called in the fence callback, on the thread that delivers, before the fence is recorded: a
  // test looks there at what the guest's memory held when the VMM was told.
  void on_retire(std::function<void(uint32_t ctx, uint64_t id)> f) { on_retire_ = std::move(f); }

  static uint64_t jobs_completed() {
    rvgl_emu_counters c{};
    rvgl_emu_get_counters(&c, sizeof c);
    return c.jobs_completed;
  }

 private:
  void record(uint32_t ctx, uint32_t ring, uint64_t id) {
    const uint64_t jobs = jobs_completed();
    if (on_retire_) on_retire_(ctx, id);
    std::lock_guard lk(mu_);
    if (!p_.async() && in_create_) ++written_inside_create_;
    retired_.push_back({ctx, ring, id, jobs});
    threads_.push_back(std::this_thread::get_id());
  }

  VmmProfile p_;
  virgl_renderer_callbacks cbs_{};
  int result_ = -1;
  mutable std::mutex mu_;
  std::vector<Retired> retired_;
  std::vector<std::thread::id> threads_;
  std::atomic<bool> in_create_{false};  // the VMM's thread is inside fence()
  int written_inside_create_ = 0;
  std::function<void(uint32_t, uint64_t)> on_retire_;  // set before any fence
};

}  // namespace rvgl::hooks_test
