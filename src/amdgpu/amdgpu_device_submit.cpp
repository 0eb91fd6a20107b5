#include <xf86drm.h>

#include <cerrno>

#include "amdgpu/amdgpu_device.h"
#include "util/small_buffer.h"

namespace rvgl {

int AmdgpuDevice::ctx_create(int32_t priority, uint32_t *ctx_id) {
  drm_amdgpu_ctx args{};
  args.in.op = AMDGPU_CTX_OP_ALLOC_CTX;
  args.in.priority = priority;
  int r = ioctl(DRM_IOCTL_AMDGPU_CTX, &args);
  if (r == 0) *ctx_id = args.out.alloc.ctx_id;
  return r;
}

void AmdgpuDevice::ctx_free(uint32_t ctx_id) {
  drm_amdgpu_ctx args{};
  args.in.op = AMDGPU_CTX_OP_FREE_CTX;
  args.in.ctx_id = ctx_id;
  ioctl(DRM_IOCTL_AMDGPU_CTX, &args);
}

int AmdgpuDevice::ctx_query_state2(uint32_t ctx_id, uint64_t *flags) {
  drm_amdgpu_ctx args{};
  args.in.op = AMDGPU_CTX_OP_QUERY_STATE2;
  args.in.ctx_id = ctx_id;
  int r = ioctl(DRM_IOCTL_AMDGPU_CTX, &args);
  if (r == 0) *flags = args.out.state.flags;
  return r;
}

int AmdgpuDevice::ctx_query_reset(uint32_t ctx_id, bool *reset) {
  drm_amdgpu_ctx args{};
  args.in.op = AMDGPU_CTX_OP_QUERY_STATE;
  args.in.ctx_id = ctx_id;
  int r = ioctl(DRM_IOCTL_AMDGPU_CTX, &args);
  if (r == 0) *reset = args.out.state.reset_status != AMDGPU_CTX_NO_RESET;
  return r;
}

int AmdgpuDevice::cs_submit(uint32_t ctx_id, uint32_t bo_list,
                            std::span<const drm_amdgpu_cs_chunk> chunks, uint64_t *handle) {
  // The kernel reads an array of pointers to chunks (one chunk per IB: it grows with them).
  SmallBuffer<uint64_t, 16> ptrs(chunks.size());
  for (size_t i = 0; i < chunks.size(); ++i)
    ptrs[i] = reinterpret_cast<uintptr_t>(&chunks[i]);
  drm_amdgpu_cs args{};
  args.in.ctx_id = ctx_id;
  args.in.bo_list_handle = bo_list;
  args.in.num_chunks = static_cast<uint32_t>(chunks.size());
  args.in.chunks = reinterpret_cast<uintptr_t>(ptrs.data());
  int r = ioctl(DRM_IOCTL_AMDGPU_CS, &args);
  if (r == 0) *handle = args.out.handle;
  return r;
}

namespace {

drm_amdgpu_bo_list_in bo_list_args(uint32_t op, uint32_t handle,
                                   std::span<const drm_amdgpu_bo_list_entry> bos) {
  drm_amdgpu_bo_list_in in{};
  in.operation = op;
  in.list_handle = handle;
  in.bo_number = static_cast<uint32_t>(bos.size());
  in.bo_info_size = sizeof(drm_amdgpu_bo_list_entry);
  in.bo_info_ptr = reinterpret_cast<uintptr_t>(bos.data());
  return in;
}

}  // namespace

int AmdgpuDevice::bo_list_create(std::span<const drm_amdgpu_bo_list_entry> bos, uint32_t *handle) {
  drm_amdgpu_bo_list args{};
  args.in = bo_list_args(AMDGPU_BO_LIST_OP_CREATE, 0, bos);
  int r = ioctl(DRM_IOCTL_AMDGPU_BO_LIST, &args);
  if (r == 0) *handle = args.out.list_handle;
  return r;
}

int AmdgpuDevice::bo_list_update(uint32_t handle, std::span<const drm_amdgpu_bo_list_entry> bos) {
  drm_amdgpu_bo_list args{};
  args.in = bo_list_args(AMDGPU_BO_LIST_OP_UPDATE, handle, bos);
  return ioctl(DRM_IOCTL_AMDGPU_BO_LIST, &args);
}

void AmdgpuDevice::bo_list_destroy(uint32_t handle) {
  drm_amdgpu_bo_list args{};
  args.in = bo_list_args(AMDGPU_BO_LIST_OP_DESTROY, handle, {});
  ioctl(DRM_IOCTL_AMDGPU_BO_LIST, &args);
}

int AmdgpuDevice::wait_cs(uint32_t ctx_id, uint32_t ip, uint32_t ring, uint64_t handle,
                          uint64_t timeout_ns) {
  drm_amdgpu_wait_cs args{};
  args.in.handle = handle;
  args.in.ip_type = ip;
  args.in.ring = ring;
  args.in.ctx_id = ctx_id;
  args.in.timeout = timeout_ns;  // the kernel takes an absolute timeout; 0 polls
  int r = ioctl(DRM_IOCTL_AMDGPU_WAIT_CS, &args);
  if (r) return r;  // the job's own error (-ETIME after a timeout, -ECANCELED, ...)
  return args.out.status ? -EBUSY : 0;
}

int AmdgpuDevice::syncobj_create(uint32_t flags, uint32_t *handle) {
  return drmSyncobjCreate(fd(), flags, handle) ? -errno : 0;
}

void AmdgpuDevice::syncobj_destroy(uint32_t handle) {
  drmSyncobjDestroy(fd(), handle);
}

int AmdgpuDevice::syncobj_timeline_wait(std::span<const uint32_t> handles,
                                        std::span<const uint64_t> points, int64_t abs_timeout_ns,
                                        uint32_t flags, uint32_t *first_signaled) {
  drm_syncobj_timeline_wait args{};
  args.handles = reinterpret_cast<uintptr_t>(handles.data());
  args.points = reinterpret_cast<uintptr_t>(points.data());
  args.timeout_nsec = abs_timeout_ns;
  args.count_handles = static_cast<uint32_t>(handles.size());
  args.flags = flags;
  int r = ioctl(DRM_IOCTL_SYNCOBJ_TIMELINE_WAIT, &args);
  if (r == 0 && first_signaled) *first_signaled = args.first_signaled;
  return r;
}

int AmdgpuDevice::syncobj_timeline_signal(uint32_t handle, uint64_t point) {
  drm_syncobj_timeline_array args{};
  args.handles = reinterpret_cast<uintptr_t>(&handle);
  args.points = reinterpret_cast<uintptr_t>(&point);
  args.count_handles = 1;
  return ioctl(DRM_IOCTL_SYNCOBJ_TIMELINE_SIGNAL, &args);
}

int AmdgpuDevice::syncobj_query(uint32_t handle, uint64_t *value, uint32_t flags) {
  drm_syncobj_timeline_array args{};
  args.handles = reinterpret_cast<uintptr_t>(&handle);
  args.points = reinterpret_cast<uintptr_t>(value);
  args.count_handles = 1;
  args.flags = flags;
  return ioctl(DRM_IOCTL_SYNCOBJ_QUERY, &args);
}

int AmdgpuDevice::syncobj_export(uint32_t handle, UniqueFd *out) {
  int fd = -1;
  if (drmSyncobjHandleToFD(this->fd(), handle, &fd)) return -errno;
  out->reset(fd);
  return 0;
}

int AmdgpuDevice::syncobj_import(int fd, uint32_t *handle) {
  return drmSyncobjFDToHandle(this->fd(), fd, handle) ? -errno : 0;
}

int AmdgpuDevice::syncobj_eventfd(uint32_t handle, uint64_t point, int efd) {
  rvgl_drm_syncobj_eventfd args{};
  args.handle = handle;
  args.point = point;
  args.fd = efd;
  return ioctl(RVGL_DRM_IOCTL_SYNCOBJ_EVENTFD, &args);
}

}  // namespace rvgl
