// One open virtio-gpu render node: sole owner of its fd, and the ioctls the transport issues on
// it, typed. Each returns 0 (or a value) or a negative errno; the transport turns those into
// messages. Like libdrm's drmIoctl, a call interrupted by a signal (EINTR, EAGAIN) is repeated.
//
// Everything goes through VirtgpuSyscalls, so a test can put a fake device underneath.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "rvgl_result.h"
#include "rvgl_virtgpu_syscalls.h"
#include "virtgpu_uapi.h"

namespace rvgl::guest::virtgpu {

class Device {
 public:
  Device() = default;
  Device(VirtgpuSyscalls &sys, int fd) : sys_(&sys), fd_(fd) {}  // takes ownership of fd
  ~Device() { reset(); }
  Device(Device &&o) noexcept;
  Device &operator=(Device &&o) noexcept;
  Device(const Device &) = delete;
  Device &operator=(const Device &) = delete;

  // Opens `path` read-write, close-on-exec.
  static Result<Device> open(VirtgpuSyscalls &sys, const std::string &path);

  bool valid() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  VirtgpuSyscalls &sys() const { return *sys_; }
  void reset();

  // The ioctl, repeated while it is interrupted.
  int ioctl(unsigned long request, void *arg) const;

  // DRM_IOCTL_VERSION's driver name (what libdrm's drmGetVersion reports), or -errno.
  Result<std::string> driver_name() const;
  // DRM_IOCTL_VIRTGPU_GETPARAM. The kernel writes an int through `value`; unknown ids are
  // -EINVAL (an older kernel).
  int get_param(uint64_t param, uint64_t &value) const;
  // DRM_IOCTL_VIRTGPU_GET_CAPS into `out` (the kernel copies min(out.size(), its capset size)).
  int get_caps(uint32_t capset_id, uint32_t version, std::span<uint8_t> out) const;
  int context_init(std::span<const rvgl_virtgpu_context_set_param> params) const;
  int create_blob(rvgl_virtgpu_resource_create_blob &args) const;
  int create_blob_userptr(rvgl_virtgpu_resource_create_blob_userptr &args) const;
  // DRM_IOCTL_VIRTGPU_MAP: the offset at which to mmap the device fd for this handle.
  int map_offset(uint32_t handle, uint64_t &offset) const;
  int gem_close(uint32_t handle) const;
  int execbuffer(rvgl_virtgpu_execbuffer &args) const;
  // DRM_IOCTL_VIRTGPU_WAIT: 0 when idle, -EBUSY when not (at once with NOWAIT, else after the
  // kernel's own bound of 15 s).
  int wait(uint32_t handle, uint32_t flags) const;

 private:
  VirtgpuSyscalls *sys_ = nullptr;
  int fd_ = -1;
};

}  // namespace rvgl::guest::virtgpu
