#include <cerrno>

#include "amdgpu/amdgpu_device.h"

namespace rvgl {

namespace {

drm_amdgpu_info make_info(uint32_t query, void *out, uint32_t size) {
  drm_amdgpu_info args{};
  args.return_pointer = reinterpret_cast<uintptr_t>(out);
  args.return_size = size;
  args.query = query;
  return args;
}

}  // namespace

int AmdgpuDevice::query_info(uint32_t query, void *out, uint32_t size) {
  auto args = make_info(query, out, size);
  return ioctl(DRM_IOCTL_AMDGPU_INFO, &args);
}

int AmdgpuDevice::query_hw_ip_info(uint32_t ip, rvgl_drm_amdgpu_info_hw_ip *out) {
  *out = {};
  auto args = make_info(AMDGPU_INFO_HW_IP_INFO, out, sizeof(*out));
  args.query_hw_ip.type = ip;
  return ioctl(DRM_IOCTL_AMDGPU_INFO, &args);
}

int AmdgpuDevice::query_hw_ip_count(uint32_t ip, uint32_t *count) {
  auto args = make_info(AMDGPU_INFO_HW_IP_COUNT, count, sizeof(*count));
  args.query_hw_ip.type = ip;
  return ioctl(DRM_IOCTL_AMDGPU_INFO, &args);
}

int AmdgpuDevice::query_dev_info(rvgl_drm_amdgpu_info_device *out) {
  // An older kernel fills only its shorter prefix; the rest stays zero.
  *out = {};
  return query_info(AMDGPU_INFO_DEV_INFO, out, sizeof(*out));
}

int AmdgpuDevice::query_uq_metadata(uint32_t ip, rvgl_drm_amdgpu_info_uq_metadata *out) {
  auto args = make_info(RVGL_AMDGPU_INFO_UQ_FW_AREAS, out, sizeof(*out));
  args.query_hw_ip.type = ip;
  return ioctl(DRM_IOCTL_AMDGPU_INFO, &args);
}

int AmdgpuDevice::query_gpuvm_fault(rvgl_drm_amdgpu_info_gpuvm_fault *out) {
  return query_info(RVGL_AMDGPU_INFO_GPUVM_FAULT, out, sizeof(*out));
}

int AmdgpuDevice::userq_create(const rvgl_drm_amdgpu_userq_in &in, uint32_t *queue_id) {
  rvgl_drm_amdgpu_userq args{};
  args.in = in;
  args.in.op = RVGL_AMDGPU_USERQ_OP_CREATE;
  int r = ioctl(RVGL_DRM_IOCTL_AMDGPU_USERQ, &args);
  if (r == 0) *queue_id = args.out.queue_id;
  return r;
}

int AmdgpuDevice::userq_free(uint32_t queue_id) {
  rvgl_drm_amdgpu_userq args{};
  args.in.op = RVGL_AMDGPU_USERQ_OP_FREE;
  args.in.queue_id = queue_id;
  return ioctl(RVGL_DRM_IOCTL_AMDGPU_USERQ, &args);
}

int AmdgpuDevice::userq_query_status(uint32_t queue_id, uint32_t *flags) {
  rvgl_drm_amdgpu_userq args{};
  args.in.op = RVGL_AMDGPU_USERQ_OP_QUERY_STATUS;
  args.in.queue_id = queue_id;
  int r = ioctl(RVGL_DRM_IOCTL_AMDGPU_USERQ, &args);
  if (r == 0) *flags = args.out_qs.flags;
  return r;
}

int AmdgpuDevice::profiler(rvgl_drm_amdgpu_profiler_args *args) {
  return ioctl(RVGL_DRM_IOCTL_AMDGPU_PROFILER, args);
}

}  // namespace rvgl
