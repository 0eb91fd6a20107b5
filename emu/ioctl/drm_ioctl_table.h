// The ioctls a render node answers: number, name (for RVGL_EMU_FAIL), the kernel's definition
// (size and direction) and permission flags (drm_ioctl.c DRM_IOCTL_DEF, amdgpu_drv.c).
#pragma once

#include <cstdint>

#include "ioctl/handlers.h"

namespace rvgl::emu {

inline constexpr uint32_t kRenderAllow = 1u << 0;  // DRM_RENDER_ALLOW
inline constexpr uint32_t kRenderOnly = 1u << 1;   // nothing the primary node lacks, here unused

struct DrmIoctl {
  uint32_t nr;
  const char *name;
  unsigned long cmd;  // the kernel's DRM_IOCTL_* value
  uint32_t flags;
  DrmHandler handler;
};

const DrmIoctl *find_drm_ioctl(uint32_t nr);

}  // namespace rvgl::emu
