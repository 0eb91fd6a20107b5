#include "amdgpu/amdgpu_device.h"

#include <fcntl.h>
#include <xf86drm.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace rvgl {

std::shared_ptr<AmdgpuDevice> AmdgpuDevice::open(const std::string &path, int *err) {
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CLOEXEC));
  if (!fd) {
    *err = -errno;
    return nullptr;
  }
  return adopt(std::move(fd), err);
}

std::shared_ptr<AmdgpuDevice> AmdgpuDevice::adopt(UniqueFd fd, int *err) {
  std::shared_ptr<AmdgpuDevice> dev(new AmdgpuDevice(std::move(fd)));
  *err = dev->check_driver();
  return *err ? nullptr : dev;
}

std::shared_ptr<AmdgpuDevice> AmdgpuDevice::reopen(int *err) const {
  // By name, not through /proc/self/fd: a new open of the node is a new DRM file. A VMM's fd may
  // be a primary node; its render node is preferred, the node itself otherwise.
  char *name = drmGetRenderDeviceNameFromFd(fd_.get());
  if (!name) name = drmGetDeviceNameFromFd2(fd_.get());
  if (!name) {
    *err = -ENODEV;
    return nullptr;
  }
  const std::string path(name);
  free(name);
  return open(path, err);
}

int AmdgpuDevice::check_driver() {
  drmVersionPtr v = drmGetVersion(fd_.get());
  if (!v) return -ENODEV;
  // amdgpu's KMS interface is version 3 (libdrm amdgpu_device_initialize checks the same).
  const bool ok = v->name && std::strcmp(v->name, "amdgpu") == 0 && v->version_major == 3;
  drm_minor_ = static_cast<uint32_t>(v->version_minor);
  drmFreeVersion(v);
  return ok ? 0 : -ENODEV;
}

int AmdgpuDevice::ioctl(unsigned long request, void *arg) const {
  return drmIoctl(fd_.get(), request, arg) == 0 ? 0 : -errno;
}

}  // namespace rvgl
