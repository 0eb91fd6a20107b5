// DRM core ABI newer than the drm.h of libdrm 2.4.114, from the kernel's include/uapi/drm/drm.h.
// Prefixed so a newer system header defining the same names does not clash.
#pragma once

#include <drm.h>

#include <cstdint>

namespace rvgl::emu {

// DRM_IOCTL_SYNCOBJ_EVENTFD (Linux 6.6, drm_syncobj_eventfd_ioctl): an eventfd is signalled when
// a syncobj point is signalled, or only available with DRM_SYNCOBJ_WAIT_FLAGS_WAIT_AVAILABLE.
struct rvgl_drm_syncobj_eventfd {
  uint32_t handle;
  uint32_t flags;
  uint64_t point;
  int32_t fd;
  uint32_t pad;
};
static_assert(sizeof(rvgl_drm_syncobj_eventfd) == 24);

inline constexpr uint32_t kDrmSyncobjEventfdNr = 0xCF;
#define RVGL_DRM_IOCTL_SYNCOBJ_EVENTFD DRM_IOWR(0xCF, struct rvgl::emu::rvgl_drm_syncobj_eventfd)

}  // namespace rvgl::emu
