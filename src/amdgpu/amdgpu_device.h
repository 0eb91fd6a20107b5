// One open amdgpu render node: the only place in the context type that issues ioctls.
//
// Each guest context gets its own AmdgpuDevice (its own fd, hence its own GPU VM and handle
// namespace, DESIGN.md D2). Every method returns 0 or a negative errno and never throws.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include <amdgpu_drm.h>

#include "amdgpu/uapi/amdgpu_drm_ext.h"
#include "util/unique_fd.h"

namespace rvgl {

class AmdgpuDevice {
 public:
  // Opens path (a render node) read-write; checks the driver is amdgpu 3.x.
  static std::shared_ptr<AmdgpuDevice> open(const std::string &path, int *err);
  // Takes ownership of an fd; same checks.
  static std::shared_ptr<AmdgpuDevice> adopt(UniqueFd fd, int *err);
  // A second, independent open of this device's node (its own DRM file: own handles, own VM).
  std::shared_ptr<AmdgpuDevice> reopen(int *err) const;
  // An fd the VMM chose (its get_drm_fd callback). Kept only when no other fd of this process
  // names the same open file (kcmp KCMP_FILE over /proc/self/fd): a dup the VMM kept, or handed
  // to another context, would share the GPU VM and handle namespace. Otherwise, or when that
  // cannot be told, the node is re-opened by path for a file of the context's own; -EBUSY when
  // it has no path or the path is not the same device (st_rdev), else that open's error.
  static std::shared_ptr<AmdgpuDevice> adopt_private(UniqueFd fd, int *err);

  int fd() const { return fd_.get(); }
  uint32_t drm_minor_version() const { return drm_minor_; }

  ~AmdgpuDevice();
  // Memory the kernel may still write into because it failed to let go of it (a release ioctl
  // that failed: an SPM destination) is freed only after this file is closed, which makes the
  // kernel drop everything the file held. It is handed over through a KeptRoom
  // (amdgpu/kept_room.h), made while there is memory for it. How many there are, and how many
  // places rooms hold:
  size_t kept_until_closed() const;
  size_t kept_places_reserved() const;

  // ---- memory (amdgpu_device_memory.cpp) ----
  int gem_create(uint64_t size, uint64_t alignment, uint64_t domains, uint64_t flags,
                 uint32_t *handle);
  void gem_close(uint32_t handle);
  int gem_mmap_offset(uint32_t handle, uint64_t *offset);
  int gem_userptr(const void *addr, uint64_t size, uint32_t flags, uint32_t *handle);
  int gem_va(uint32_t op, uint32_t handle, uint64_t va, uint64_t offset, uint64_t size,
             uint32_t flags);
  // The same, with the operation's page-table update added to `syncobj` at `point` (Linux
  // 6.16's vm_timeline_syncobj_out; an older kernel does the operation and adds nothing).
  int gem_va_timeline(uint32_t op, uint32_t handle, uint64_t va, uint64_t offset, uint64_t size,
                      uint32_t flags, uint32_t syncobj, uint64_t point);
  int prime_export(uint32_t handle, UniqueFd *out);
  int prime_import(int fd, uint32_t *handle);

  // ---- submission and sync (amdgpu_device_submit.cpp) ----
  int ctx_create(int32_t priority, uint32_t *ctx_id);
  void ctx_free(uint32_t ctx_id);
  // AMDGPU_CTX_QUERY2_FLAGS_* of the context.
  int ctx_query_state2(uint32_t ctx_id, uint64_t *flags);
  // QUERY_STATE (v1): *reset is whether the device's reset counter moved since the context's
  // last v1 query (or its creation); the kernel remembers the counter per context
  // (amdgpu_ctx_query(), reset_counter_query).
  int ctx_query_reset(uint32_t ctx_id, bool *reset);
  // bo_list: a handle from bo_list_create, or 0 for none.
  int cs_submit(uint32_t ctx_id, uint32_t bo_list, std::span<const drm_amdgpu_cs_chunk> chunks,
                uint64_t *handle);
  // AMDGPU_BO_LIST: a kernel-held BO list, so a CS need not pass the resident set every time.
  int bo_list_create(std::span<const drm_amdgpu_bo_list_entry> bos, uint32_t *handle);
  int bo_list_update(uint32_t handle, std::span<const drm_amdgpu_bo_list_entry> bos);
  void bo_list_destroy(uint32_t handle);
  // 0 when the job completed without error, the job's error when it failed, -EBUSY if busy.
  int wait_cs(uint32_t ctx_id, uint32_t ip, uint32_t ring, uint64_t handle, uint64_t timeout_ns);

  int syncobj_create(uint32_t flags, uint32_t *handle);
  void syncobj_destroy(uint32_t handle);
  // Waits until any (or all) points are signalled or abs_timeout_ns (CLOCK_MONOTONIC) passes.
  int syncobj_timeline_wait(std::span<const uint32_t> handles, std::span<const uint64_t> points,
                            int64_t abs_timeout_ns, uint32_t flags, uint32_t *first_signaled);
  int syncobj_timeline_signal(uint32_t handle, uint64_t point);
  // flags: DRM_SYNCOBJ_QUERY_FLAGS_LAST_SUBMITTED for the newest point added, not signalled.
  int syncobj_query(uint32_t handle, uint64_t *value, uint32_t flags = 0);
  // The syncobj itself as an fd (not a sync file), and an fd like it made a handle of this file.
  int syncobj_export(uint32_t handle, UniqueFd *out);
  int syncobj_import(int fd, uint32_t *handle);
  // DRM_IOCTL_SYNCOBJ_EVENTFD (Linux 6.6): eventfd `efd` is signalled once `point` is.
  int syncobj_eventfd(uint32_t handle, uint64_t point, int efd);

  // ---- queries (amdgpu_device_info.cpp) ----
  int query_info(uint32_t query, void *out, uint32_t size);
  int query_hw_ip_info(uint32_t ip, rvgl_drm_amdgpu_info_hw_ip *out);
  int query_hw_ip_count(uint32_t ip, uint32_t *count);
  int query_dev_info(rvgl_drm_amdgpu_info_device *out);
  int query_uq_metadata(uint32_t ip, rvgl_drm_amdgpu_info_uq_metadata *out);
  int query_gpuvm_fault(rvgl_drm_amdgpu_info_gpuvm_fault *out);

  // ---- user queues and profiler (amdgpu_device_info.cpp) ----
  int userq_create(const rvgl_drm_amdgpu_userq_in &in, uint32_t *queue_id);
  int userq_free(uint32_t queue_id);
  // RVGL_AMDGPU_USERQ_OP_QUERY_STATUS: *flags = RVGL_AMDGPU_USERQ_QUERY_STATUS_FLAGS_*.
  int userq_query_status(uint32_t queue_id, uint32_t *flags);
  int profiler(rvgl_drm_amdgpu_profiler_args *args);

  // Any ioctl on this device: 0 or -errno (retries EINTR/EAGAIN like drmIoctl).
  int ioctl(unsigned long request, void *arg) const;

 private:
  explicit AmdgpuDevice(UniqueFd fd) : fd_(std::move(fd)) {}
  int check_driver();

  friend class KeptRoom;
  // kept_ has capacity for every reserved place: a keep into one never allocates.
  bool reserve_kept(size_t n);
  void unreserve_kept(size_t n);
  void keep_reserved(std::shared_ptr<const void> what);

  UniqueFd fd_;
  uint32_t drm_minor_ = 0;
  mutable std::mutex kept_mu_;
  std::vector<std::shared_ptr<const void>> kept_;
  size_t kept_reserved_ = 0;
};

}  // namespace rvgl
