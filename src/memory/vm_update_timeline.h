// When the GPU stops seeing guest pages a GEM_VA UNMAP took out of the context's VM.
//
// The unmap ioctl returns before the page tables change: the update is a job of the VM's own, run
// after the VM's command submissions in flight (amdgpu_vm_clear_freed()), then the TLB is
// flushed. A kernel queue's later work waits for that update (the CS syncs to it), and the jobs
// already submitted are waited for by the caller (ComputeContext::detach_resource). A user
// queue's work is synchronised with neither: the engine reads the page tables as they are, so
// until the update has run it can still write into pages the VMM is about to give back to the
// guest. Linux 6.16 says when it has run: GEM_VA's vm_timeline_syncobj_out, here one syncobj
// whose points are the context's unmaps of guest pages, in order (a point's fence stands for the
// updates before it too: the VM's updates run in order, and a timeline point signals only after
// every earlier one).
#pragma once

#include <cstdint>
#include <memory>

#include "amdgpu/amdgpu_device.h"

namespace rvgl {

class VmUpdateTimeline {
 public:
  explicit VmUpdateTimeline(std::shared_ptr<AmdgpuDevice> dev) : dev_(std::move(dev)) {}
  ~VmUpdateTimeline();
  VmUpdateTimeline(const VmUpdateTimeline &) = delete;
  VmUpdateTimeline &operator=(const VmUpdateTimeline &) = delete;

  // GEM_VA UNMAP whose page-table update becomes the next point. Where that cannot be had (no
  // syncobj for want of memory, the kernel refusing the longer GEM_VA) it unmaps without one and
  // counts the unmap as untracked. Returns what the unmap returned.
  int unmap(uint32_t handle, uint64_t va, uint64_t offset, uint64_t size);
  // The newest point handed to the kernel (0: none).
  uint64_t last_point() const { return last_point_; }
  // Blocks until `point`'s update has run, or the deadline passes; whether it is known to have
  // run. A kernel that ignored the syncobj (older than 6.16: the point never gets a fence, a wait
  // without WAIT_FOR_SUBMIT says so at once, -EINVAL, and no point was ever added) is not asked
  // again: later unmaps carry no point. A refused wait is asked again (wait_syncobj_point).
  // Allocates nothing.
  bool wait(uint64_t point, int64_t abs_deadline_ns);
  // Unmaps made without a point where the kernel knows the field (it refused the point): the
  // detach cannot wait for their updates (ContextStats::vm_updates_untracked).
  uint64_t untracked() const { return untracked_; }

 private:
  std::shared_ptr<AmdgpuDevice> dev_;
  uint32_t syncobj_ = 0;
  bool kernel_ignores_ = false;  // the kernel never added a point
  uint64_t last_point_ = 0;
  uint64_t waited_ = 0;  // every point up to here has been seen signalled
  uint64_t untracked_ = 0;
};

}  // namespace rvgl
