#include "vmm_callbacks.h"

#include <cstddef>
#include <cstring>

namespace rvgl::hooks {

namespace {

// Bytes of virgl_renderer_callbacks a VMM of each version provides.
size_t callbacks_size(int version) {
  switch (version) {
    case 1:
      return offsetof(virgl_renderer_callbacks, get_drm_fd);
    case 2:
      return offsetof(virgl_renderer_callbacks, write_context_fence);
    case 3:
      return offsetof(virgl_renderer_callbacks, get_egl_display);
    case 4:
      return sizeof(virgl_renderer_callbacks);
    default:
      return 0;
  }
}

}  // namespace

VmmCallbacks::VmmCallbacks(void *cookie, int flags, const virgl_renderer_callbacks *cbs)
    : cookie_(cookie), flags_(flags), given_(cbs) {
  if (!cbs) return;
  version_ = cbs->version;
  const size_t n = callbacks_size(version_);
  if (n == 0) return;  // unknown version: we use none of its fields
  std::memcpy(&copy_, cbs, n);
  have_copy_ = true;
  write_fence_ = copy_.write_fence;
  if (version_ >= 2) get_drm_fd_ = copy_.get_drm_fd;
  if (version_ >= 3) write_context_fence_ = copy_.write_context_fence;
}

int VmmCallbacks::get_drm_fd() const {
  return get_drm_fd_ ? get_drm_fd_(cookie_) : -1;
}

const virgl_renderer_callbacks *VmmCallbacks::for_real_library(WriteFenceFn write_fence,
                                                               bool drop_egl_display) {
  if (!have_copy_) return nullptr;
  // A VMM without write_fence keeps it null: the real library then behaves as it would for it.
  // Written only when it changes: on a repeated init the running real library may be reading
  // this copy on its own thread (its write_fence with ASYNC_FENCE_CB).
  if (write_fence_ && copy_.write_fence != write_fence) copy_.write_fence = write_fence;
  if (drop_egl_display && version_ >= 4 && copy_.get_egl_display) copy_.get_egl_display = nullptr;
  return &copy_;
}

}  // namespace rvgl::hooks
