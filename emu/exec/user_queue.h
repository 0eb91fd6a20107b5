// A user-mode queue (DRM_AMDGPU_USERQ): the caller writes packets into a ring in its own GPU VA
// and bumps a write pointer in memory; no ioctl follows. A worker watches that pointer, executes
// what was added, and publishes the read pointer, as MES and the engine would.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>

#include "config/device_profile.h"
#include "exec/worker_thread.h"
#include "memory/buffer_object.h"
#include "memory/gpu_vm.h"

namespace rvgl::emu {

class UserQueue {
 public:
  struct Params {
    uint32_t ip = 0;
    std::shared_ptr<GpuVm> vm;
    uint64_t queue_va = 0, queue_size = 0, rptr_va = 0, wptr_va = 0;
    std::shared_ptr<BufferObject> doorbell;
    uint32_t doorbell_offset = 0;
    const DeviceProfile *profile = nullptr;
  };
  explicit UserQueue(Params p);
  ~UserQueue();
  UserQueue(const UserQueue &) = delete;
  UserQueue &operator=(const UserQueue &) = delete;

  bool start();
  void stop();
  bool hung() const { return hung_.load(); }
  void forget_after_fork() { thread_.forget(); }

  std::mutex &fork_lock() { return mu_; }

 private:
  void loop();
  // Executes ring contents between rptr and wptr; false when the queue hangs.
  bool process(uint64_t rptr, uint64_t wptr);

  Params p_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> hung_{false};
  uint64_t batches_ = 0;
  WorkerThread thread_;
};

}  // namespace rvgl::emu
