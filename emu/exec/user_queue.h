// A user-mode queue (DRM_AMDGPU_USERQ): the caller writes packets into a ring in its own GPU VA,
// stores the write pointer in memory and writes the same value to the queue's doorbell; no ioctl
// follows. A worker plays the engine: it watches the doorbell the kernel assigned to the queue
// (and nothing else: a write at another doorbell does nothing), executes what the doorbell's value
// says was added, and writes the read pointer back, as the CP or SDMA engine would.
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
    uint32_t doorbell_offset = 0;  // index of an 8-byte doorbell in `doorbell`
    const DeviceProfile *profile = nullptr;
  };
  explicit UserQueue(Params p);
  ~UserQueue();
  UserQueue(const UserQueue &) = delete;
  UserQueue &operator=(const UserQueue &) = delete;

  bool start();
  void stop();
  // MES has stopped the queue (a fault, a bad packet, a pointer that went backwards, a hang).
  bool hung() const { return hung_.load(); }
  const BufferObject *doorbell() const { return p_.doorbell.get(); }
  uint32_t doorbell_offset() const { return p_.doorbell_offset; }
  void forget_after_fork() { thread_.forget(); }

  std::mutex &fork_lock() { return mu_; }

 private:
  void loop(uint64_t doorbell_at_create);
  uint64_t read_doorbell() const;
  // Executes ring contents between rptr and wptr; false when the queue hangs.
  bool process(uint64_t rptr, uint64_t wptr);

  Params p_;
  uint64_t *doorbell_word_ = nullptr;  // in the doorbell object's pages
  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> hung_{false};
  uint64_t batches_ = 0;
  WorkerThread thread_;
};

}  // namespace rvgl::emu
