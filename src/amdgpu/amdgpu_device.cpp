#include "amdgpu/amdgpu_device.h"

#include <fcntl.h>
#include <xf86drm.h>

#include <cerrno>
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
