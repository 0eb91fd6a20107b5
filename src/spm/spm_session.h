// One context's hold on one SPM (DESIGN.md D6). SET_DEST runs on the session's own worker, never
// on the VMM's thread: it may block in the kernel for the guest's timeout.
//
// A BO destination is handed to the kernel as is (its host mapping: host memory, no copy), kept
// referenced and mapped until the kernel retires it (the next SET_DEST, or release). A userptr
// destination is guest-owned memory that the VMM may take back at any moment (unref, detach,
// disconnect) while the kernel call is blocked, and the kernel cannot be made to let go of a
// buffer synchronously. So the kernel never sees guest pages: it writes a host-owned bounce
// buffer, and when the kernel retires it the worker copies the written part (slice headers and
// their bytes_copied) into the guest's pages through MemoryObject::write_guest, which a revoked
// object refuses. Nothing is written into the guest's pages after its resource is dropped.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <deque>
#include <thread>

#include "amdgpu/amdgpu_device.h"
#include "amdgpu/kept_room.h"
#include "memory/memory_object.h"
#include "spm/spm_callbacks.h"
#include "util/mapping.h"
#include "queue/sync_timeline.h"
#include "rocm_virgl_protocol.h"

namespace rvgl {

class SpmSession {
 public:
  struct Destination {
    std::shared_ptr<MemoryObject> object;  // null: stop streaming
    uint8_t *host = nullptr;               // what the kernel writes into
    uint32_t size = 0;
    // Userptr destinations: the host-owned buffer at `host`, copied to [guest_offset,
    // guest_offset + size) of the object when retired; slices as the kernel splits the buffer.
    std::shared_ptr<Mapping> bounce;
    uint64_t guest_offset = 0;
    uint32_t slices = 1;
    // BO destinations: the CPU mapping `host` lies in (MemoryObject::host_range), held only by
    // the destination (and kept memory, spm_session.cpp) while the kernel may write there.
    std::shared_ptr<const void> host_mapping;
  };
  // A host-owned buffer of `size` bytes for a userptr destination (pages are touched only as the
  // kernel writes them), holding `charge` (host RAM charged to the context) while it lives.
  // Invalid when out of memory.
  static std::shared_ptr<Mapping> make_bounce(uint32_t size, Charge charge);
  // Acquires the kernel's SPM on dev (the caller already holds the arbiter). Each finished
  // SET_DEST is reported through `callbacks` (shared with the owner, who may cut them).
  static int create(std::shared_ptr<AmdgpuDevice> dev, uint32_t xcp, uint32_t ring_idx,
                    std::shared_ptr<SpmCallbacks> callbacks, std::unique_ptr<SpmSession> *out);
  // Stops the stream and releases the kernel's SPM. The kernel's RELEASE waits for a SET_DEST in
  // progress (up to its timeout), so callers on the VMM's thread hand the session to
  // SpmReaper instead of destroying it themselves.
  ~SpmSession();

  // Releases the kernel's SPM now when no SET_DEST is queued or in the kernel, where the kernel's
  // RELEASE waits for nothing, so the VMM's thread may make it and the SPM is free for others
  // when the guest's SPM_RELEASE returns. The session accepts no SET_DEST after the call. False
  // when one is under way (or the kernel refused): the destructor releases, off that thread.
  // Same thread as set_dest() (set_dest() alone adds work, so none can start meanwhile).
  bool release_if_idle();

  // Queues a SET_DEST; they run in order, at most kMaxPending at a time (-EBUSY beyond).
  // rsp_off RVGL_RSP_NONE: no response.
  static constexpr size_t kMaxPending = 4;
  int set_dest(Destination dst, uint32_t timeout_ms, uint32_t seqno, uint32_t rsp_off);

  uint32_t xcp() const { return xcp_; }
  uint32_t ring_idx() const { return ring_idx_; }
  const std::shared_ptr<SyncTimeline> &timeline() const { return timeline_; }
  // SET_DESTs accepted so far: the ring point a fence created now waits for.
  uint64_t accepted() const;
  uint64_t completed() const;
  uint32_t data_loss_total() const;

 private:
  struct Job {
    Destination dst;
    uint32_t timeout_ms;
    uint32_t seqno;
    uint32_t rsp_off;
  };
  SpmSession(std::shared_ptr<AmdgpuDevice> dev, uint32_t xcp, uint32_t ring,
             std::shared_ptr<SpmCallbacks> callbacks)
      : dev_(std::move(dev)), xcp_(xcp), ring_idx_(ring), callbacks_(std::move(callbacks)) {}
  void run();
  // A retired userptr destination: what the kernel wrote goes to the guest's pages (if still
  // theirs).
  static void deliver(const Destination &d);
  int kernel_op(uint32_t op, rvgl_drm_amdgpu_spm_args *spm);

  std::shared_ptr<AmdgpuDevice> dev_;
  uint32_t xcp_;
  uint32_t ring_idx_;
  std::shared_ptr<SpmCallbacks> callbacks_;
  std::shared_ptr<SyncTimeline> timeline_;
  bool acquired_ = false;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> jobs_;
  bool stop_ = false;
  uint64_t accepted_ = 0;
  uint64_t completed_ = 0;
  uint32_t data_loss_total_ = 0;
  Destination current_;  // what the kernel is writing into now
  // Made with current_, used by the destructor should the kernel not let go of it: a destructor
  // cannot report running out of memory.
  KeptRoom current_room_;
  std::thread worker_;
};

}  // namespace rvgl
