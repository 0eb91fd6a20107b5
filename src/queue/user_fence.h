// A page the GPU writes a job's sequence number into once the job's last packet has run: the CS
// names it in an AMDGPU_CHUNK_ID_FENCE chunk (amdgpu_cs_p1_user_fence(): a non-userptr object of
// exactly one page, the 8 bytes inside it), and amdgpu_ib_schedule() emits the 64-bit fence write
// to it after the job's IBs, before the interrupt that signals the job's fences. Reading it tells
// that a job finished without an ioctl or a wakeup, as Mesa's amdgpu winsys checks its user
// fence before it asks the kernel. A job that never reached its end (cancelled, timed out, lost
// in a reset) never writes it, so a write says "done", and its absence says nothing.
//
// Threads: created with its queue on the VMM's thread; read on any thread.
#pragma once

#include <cstdint>
#include <memory>

#include "amdgpu/amdgpu_device.h"
#include "util/mapping.h"

namespace rvgl {

class UserFence {
 public:
  // One GTT page of the device's, mapped for reading. Two ioctls (create, mmap offset) and an mmap,
  // once per queue.
  static std::unique_ptr<UserFence> create(std::shared_ptr<AmdgpuDevice> dev, int *err);
  ~UserFence();
  UserFence(const UserFence &) = delete;
  UserFence &operator=(const UserFence &) = delete;

  // The object and offset a CS names in its fence chunk.
  uint32_t handle() const { return handle_; }
  static constexpr uint32_t kOffset = 0;
  // The newest sequence number the GPU wrote (0: none yet). Sequence numbers of one kernel
  // context's ring grow by one per job, so every job at or below it is done.
  uint64_t read() const;

 private:
  UserFence(std::shared_ptr<AmdgpuDevice> dev, uint32_t handle)
      : dev_(std::move(dev)), handle_(handle) {}
  std::shared_ptr<AmdgpuDevice> dev_;
  uint32_t handle_;
  Mapping map_;
};

}  // namespace rvgl
