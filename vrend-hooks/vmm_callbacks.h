// What the VMM gave virgl_renderer_init: its cookie, flags and callbacks, copied field by field
// up to the callbacks version it declared (a version 2 struct is shorter than a version 4 one, so
// reading past its fields would read the VMM's unrelated memory).
#pragma once

#include <cstdint>

#include "virgl_api.h"

namespace rvgl::hooks {

using WriteContextFenceFn = void (*)(void *cookie, uint32_t ctx_id, uint32_t ring_idx,
                                     uint64_t fence_id);
using GetDrmFdFn = int (*)(void *cookie);
using WriteFenceFn = void (*)(void *cookie, uint32_t fence);

class VmmCallbacks {
 public:
  VmmCallbacks() = default;
  // cbs may be null or of any version; fields the version lacks read as null.
  VmmCallbacks(void *cookie, int flags, const virgl_renderer_callbacks *cbs);

  void *cookie() const { return cookie_; }
  int flags() const { return flags_; }
  // The VMM's own structure, by address only (never read again): a repeated init must name the
  // same one.
  const virgl_renderer_callbacks *given() const { return given_; }
  int version() const { return version_; }
  // The VMM asked for write_context_fence from any thread (VIRGL_RENDERER_ASYNC_FENCE_CB).
  bool async_fences() const { return flags_ & VIRGL_RENDERER_ASYNC_FENCE_CB; }
  WriteContextFenceFn write_context_fence() const { return write_context_fence_; }
  WriteFenceFn write_fence() const { return write_fence_; }
  // A fresh render-node fd the caller owns, or -1 (no callback, or the VMM has none).
  int get_drm_fd() const;

  // The callbacks to hand the real library: the VMM's own, field for field, except write_fence,
  // which becomes `write_fence` (so global fences can wait for our work, GlobalFences), and in
  // compute-only mode get_egl_display, which would make 0.10.4 start an external EGL winsys even
  // with NO_VIRGL. Only for versions this header knows (1..4); null otherwise. The pointer stays
  // valid (and the same) until this object is reassigned.
  const virgl_renderer_callbacks *for_real_library(WriteFenceFn write_fence, bool drop_egl_display);

 private:
  void *cookie_ = nullptr;
  int flags_ = 0;
  const virgl_renderer_callbacks *given_ = nullptr;
  int version_ = 0;
  WriteContextFenceFn write_context_fence_ = nullptr;
  WriteFenceFn write_fence_ = nullptr;
  GetDrmFdFn get_drm_fd_ = nullptr;
  virgl_renderer_callbacks copy_{};
  bool have_copy_ = false;
};

}  // namespace rvgl::hooks
