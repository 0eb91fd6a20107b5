// Finding a virtio-gpu render node: the render nodes under /dev/dri whose DRM driver is
// "virtio_gpu" (the name DRM_IOCTL_VERSION gives, which is what libdrm's drmGetVersion reads).
#pragma once

#include <string>
#include <vector>

#include "rvgl_result.h"
#include "rvgl_virtgpu_syscalls.h"
#include "virtgpu_device.h"

namespace rvgl::guest::virtgpu {

inline constexpr const char *kDriDirectory = "/dev/dri";
inline constexpr const char *kDriverName = "virtio_gpu";

// The paths of /dev/dri/renderD<N>, in increasing N. -ENOENT when there is no /dev/dri.
Result<std::vector<std::string>> render_node_paths(VirtgpuSyscalls &sys);

// Opens `path` and checks that its driver is virtio_gpu (-ENODEV otherwise).
Result<Device> open_virtgpu_node(VirtgpuSyscalls &sys, const std::string &path);

}  // namespace rvgl::guest::virtgpu
