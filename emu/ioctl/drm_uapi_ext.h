// DRM core ABI newer than the drm.h of libdrm 2.4.114, from the kernel's include/uapi/drm/drm.h.
// Names of the emulator's own (no macros), so they never clash with a system header or with
// src/amdgpu/uapi's definitions of the same ABI.
#pragma once

#include <drm.h>

#include <cstdint>

namespace rvgl::emu {

// DRM_IOCTL_SYNCOBJ_EVENTFD (Linux 6.6, drm_syncobj_eventfd_ioctl): an eventfd is signalled when
// a syncobj point is signalled, or only available with DRM_SYNCOBJ_WAIT_FLAGS_WAIT_AVAILABLE.
struct SyncobjEventfdArgs {
  uint32_t handle;
  uint32_t flags;
  uint64_t point;
  int32_t fd;
  uint32_t pad;
};
static_assert(sizeof(SyncobjEventfdArgs) == 24);

inline constexpr uint32_t kDrmSyncobjEventfdNr = 0xCF;
inline constexpr unsigned long kDrmIoctlSyncobjEventfd = DRM_IOWR(0xCF, SyncobjEventfdArgs);

}  // namespace rvgl::emu
