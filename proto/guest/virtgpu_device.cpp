#include "virtgpu_device.h"

#include <fcntl.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace rvgl::guest::virtgpu {

namespace {

uint64_t to_u64(const void *p) {
  return reinterpret_cast<uintptr_t>(p);
}

}  // namespace

Device::Device(Device &&o) noexcept
    : sys_(std::exchange(o.sys_, nullptr)), fd_(std::exchange(o.fd_, -1)) {}

Device &Device::operator=(Device &&o) noexcept {
  if (this != &o) {
    reset();
    sys_ = std::exchange(o.sys_, nullptr);
    fd_ = std::exchange(o.fd_, -1);
  }
  return *this;
}

void Device::reset() {
  // Closing the render node frees every GEM handle and mapping offset of this file in the kernel.
  if (fd_ >= 0) (void)sys_->close(fd_);
  fd_ = -1;
}

Result<Device> Device::open(VirtgpuSyscalls &sys, const std::string &path) {
  const int fd = sys.open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return make_error(fd, "virtio-gpu: open " + path + ": " + std::strerror(-fd));
  return Device(sys, fd);
}

int Device::ioctl(unsigned long request, void *arg) const {
  if (fd_ < 0) return -EBADF;
  int r;
  do {
    r = sys_->ioctl(fd_, request, arg);
  } while (r == -EINTR || r == -EAGAIN);
  return r;
}

Result<std::string> Device::driver_name() const {
  // One call with a buffer far longer than "virtio_gpu": the kernel copies what fits and writes
  // back the full length (drm_copy_field), so a longer name is seen as such, never as a prefix.
  char name[64] = {};
  drm_version v{};
  v.name_len = sizeof(name) - 1;
  v.name = name;
  const int r = ioctl(DRM_IOCTL_VERSION, &v);
  if (r < 0)
    return make_error(r, std::string("virtio-gpu: DRM_IOCTL_VERSION: ") + std::strerror(-r));
  const size_t len = v.name_len < sizeof(name) - 1 ? v.name_len : sizeof(name) - 1;
  std::string s(name, len);
  if (v.name_len != len) s += "...";  // longer than the buffer: never equal to a short name
  return s;
}

int Device::get_param(uint64_t param, uint64_t &value) const {
  // Zeroed 64 bits: the kernel stores only an int (virtio_gpu_getparam_ioctl copies sizeof(int)).
  uint64_t out = 0;
  drm_virtgpu_getparam args{};
  args.param = param;
  args.value = to_u64(&out);
  const int r = ioctl(DRM_IOCTL_VIRTGPU_GETPARAM, &args);
  if (r == 0) value = out;
  return r;
}

int Device::get_caps(uint32_t capset_id, uint32_t version, std::span<uint8_t> out) const {
  if (out.empty() || out.size() > UINT32_MAX) return -EINVAL;  // the kernel refuses size 0 too
  drm_virtgpu_get_caps args{};
  args.cap_set_id = capset_id;
  args.cap_set_ver = version;
  args.addr = to_u64(out.data());
  args.size = static_cast<uint32_t>(out.size());
  return ioctl(DRM_IOCTL_VIRTGPU_GET_CAPS, &args);
}

int Device::context_init(std::span<const rvgl_virtgpu_context_set_param> params) const {
  rvgl_virtgpu_context_init args{};
  args.num_params = static_cast<uint32_t>(params.size());
  args.ctx_set_params = to_u64(params.data());
  return ioctl(RVGL_IOCTL_VIRTGPU_CONTEXT_INIT, &args);
}

int Device::create_blob(rvgl_virtgpu_resource_create_blob &args) const {
  return ioctl(RVGL_IOCTL_VIRTGPU_RESOURCE_CREATE_BLOB, &args);
}

int Device::create_blob_userptr(rvgl_virtgpu_resource_create_blob_userptr &args) const {
  return ioctl(RVGL_IOCTL_VIRTGPU_RESOURCE_CREATE_BLOB_USERPTR, &args);
}

int Device::map_offset(uint32_t handle, uint64_t &offset) const {
  drm_virtgpu_map args{};
  args.handle = handle;
  const int r = ioctl(DRM_IOCTL_VIRTGPU_MAP, &args);
  if (r == 0) offset = args.offset;
  return r;
}

int Device::gem_close(uint32_t handle) const {
  drm_gem_close args{};
  args.handle = handle;
  return ioctl(DRM_IOCTL_GEM_CLOSE, &args);
}

int Device::execbuffer(rvgl_virtgpu_execbuffer &args) const {
  return ioctl(RVGL_IOCTL_VIRTGPU_EXECBUFFER, &args);
}

int Device::wait(uint32_t handle, uint32_t flags) const {
  drm_virtgpu_3d_wait args{};
  args.handle = handle;
  args.flags = flags;
  return ioctl(DRM_IOCTL_VIRTGPU_WAIT, &args);
}

}  // namespace rvgl::guest::virtgpu
