#include "memory/vm_update_timeline.h"

#include <cerrno>

#include "queue/sync_timeline.h"

namespace rvgl {

VmUpdateTimeline::~VmUpdateTimeline() {
  if (syncobj_) dev_->syncobj_destroy(syncobj_);
}

int VmUpdateTimeline::unmap(uint32_t handle, uint64_t va, uint64_t offset, uint64_t size) {
  if (!syncobj_ && !kernel_ignores_ && dev_->syncobj_create(0, &syncobj_) != 0) syncobj_ = 0;
  if (syncobj_ && !kernel_ignores_) {
    const int r = dev_->gem_va_timeline(AMDGPU_VA_OP_UNMAP, handle, va, offset, size, 0, syncobj_,
                                        last_point_ + 1);
    if (r == 0) {
      ++last_point_;
      return 0;
    }
  }
  // The kernel could not add the point (a timeline node it had no memory for): the unmap itself
  // must still happen, or the pages stay mapped.
  const int r = dev_->gem_va(AMDGPU_VA_OP_UNMAP, handle, va, offset, size, 0);
  if (r == 0 && !kernel_ignores_) ++untracked_;
  return r;
}

bool VmUpdateTimeline::wait(uint64_t point, int64_t abs_deadline_ns) {
  if (point <= waited_) return true;
  const int r =
      wait_syncobj_point(*dev_, syncobj_, point, abs_deadline_ns, DRM_SYNCOBJ_WAIT_FLAGS_WAIT_ALL);
  if (r == 0) {
    waited_ = point;
    return true;
  }
  if (r == -EINVAL) {
    // Every GEM_VA that took a point returned before this wait, so the point has no fence
    // because the kernel added none. If it never added any, it does not know
    // vm_timeline_syncobj_out (older than 6.16): not asked again. If it added earlier ones, it
    // ran no update for this unmap then (amdgpu.debug_vm defers them to the next CS): nothing
    // to wait for now, and nothing known.
    uint64_t submitted = 0;
    if (dev_->syncobj_query(syncobj_, &submitted, DRM_SYNCOBJ_QUERY_FLAGS_LAST_SUBMITTED) == 0 &&
        submitted == 0)
      kernel_ignores_ = true;
  }
  return false;
}

}  // namespace rvgl
