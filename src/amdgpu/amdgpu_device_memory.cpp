#include <fcntl.h>
#include <xf86drm.h>

#include <cerrno>

#include "amdgpu/amdgpu_device.h"

namespace rvgl {

int AmdgpuDevice::gem_create(uint64_t size, uint64_t alignment, uint64_t domains, uint64_t flags,
                             uint32_t *handle) {
  drm_amdgpu_gem_create args{};
  args.in.bo_size = size;
  args.in.alignment = alignment;
  args.in.domains = domains;
  args.in.domain_flags = flags;
  int r = ioctl(DRM_IOCTL_AMDGPU_GEM_CREATE, &args);
  if (r == 0) *handle = args.out.handle;
  return r;
}

void AmdgpuDevice::gem_close(uint32_t handle) {
  drm_gem_close args{};
  args.handle = handle;
  ioctl(DRM_IOCTL_GEM_CLOSE, &args);
}

int AmdgpuDevice::gem_mmap_offset(uint32_t handle, uint64_t *offset) {
  drm_amdgpu_gem_mmap args{};
  args.in.handle = handle;
  int r = ioctl(DRM_IOCTL_AMDGPU_GEM_MMAP, &args);
  if (r == 0) *offset = args.out.addr_ptr;
  return r;
}

int AmdgpuDevice::gem_userptr(const void *addr, uint64_t size, uint32_t flags, uint32_t *handle) {
  drm_amdgpu_gem_userptr args{};
  args.addr = reinterpret_cast<uintptr_t>(addr);
  args.size = size;
  args.flags = flags;
  int r = ioctl(DRM_IOCTL_AMDGPU_GEM_USERPTR, &args);
  if (r == 0) *handle = args.handle;
  return r;
}

int AmdgpuDevice::gem_va(uint32_t op, uint32_t handle, uint64_t va, uint64_t offset, uint64_t size,
                         uint32_t flags) {
  return gem_va_timeline(op, handle, va, offset, size, flags, 0, 0);
}

int AmdgpuDevice::gem_va_timeline(uint32_t op, uint32_t handle, uint64_t va, uint64_t offset,
                                  uint64_t size, uint32_t flags, uint32_t syncobj, uint64_t point) {
  rvgl_drm_amdgpu_gem_va args{};
  args.handle = handle;
  args.operation = op;
  args.flags = flags;
  args.va_address = va;
  args.offset_in_bo = offset;
  args.map_size = size;
  args.vm_timeline_point = point;
  args.vm_timeline_syncobj_out = syncobj;
  // Without a syncobj, the 2.4.114 request: its 40 bytes are the longer structure's first ones.
  return ioctl(syncobj ? RVGL_DRM_IOCTL_AMDGPU_GEM_VA : DRM_IOCTL_AMDGPU_GEM_VA, &args);
}

int AmdgpuDevice::prime_export(uint32_t handle, UniqueFd *out) {
  int fd = -1;
  if (drmPrimeHandleToFD(this->fd(), handle, DRM_CLOEXEC | DRM_RDWR, &fd)) return -errno;
  out->reset(fd);
  return 0;
}

int AmdgpuDevice::prime_import(int fd, uint32_t *handle) {
  return drmPrimeFDToHandle(this->fd(), fd, handle) ? -errno : 0;
}

}  // namespace rvgl
