// The DRM and amdgpu ioctl handlers. Each takes the kernel-side copy of the argument (already
// zero-extended to the kernel's size) and returns 0, a new fd (udmabuf) or -errno. Handlers take
// the emulator state lock themselves and never block while holding it.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "core/device_file.h"

namespace rvgl::emu {

class Device;
class Fence;
class Syncobj;

using DrmHandler = int (*)(DeviceFile &f, void *data);

// drm core (drm_core_ioctls.cpp, drm_prime_ioctls.cpp, drm_syncobj_ioctls.cpp)
int drm_ioctl_version(DeviceFile &f, void *data);
int drm_ioctl_get_unique(DeviceFile &f, void *data);
int drm_ioctl_get_magic(DeviceFile &f, void *data);
int drm_ioctl_auth_magic(DeviceFile &f, void *data);
int drm_ioctl_get_client(DeviceFile &f, void *data);
int drm_ioctl_get_cap(DeviceFile &f, void *data);
int drm_ioctl_set_client_cap(DeviceFile &f, void *data);
int drm_ioctl_gem_close(DeviceFile &f, void *data);
int drm_ioctl_gem_flink(DeviceFile &f, void *data);
int drm_ioctl_gem_open(DeviceFile &f, void *data);
int drm_ioctl_prime_handle_to_fd(DeviceFile &f, void *data);
int drm_ioctl_prime_fd_to_handle(DeviceFile &f, void *data);
int drm_ioctl_syncobj_create(DeviceFile &f, void *data);
int drm_ioctl_syncobj_destroy(DeviceFile &f, void *data);
int drm_ioctl_syncobj_handle_to_fd(DeviceFile &f, void *data);
int drm_ioctl_syncobj_fd_to_handle(DeviceFile &f, void *data);
int drm_ioctl_syncobj_wait(DeviceFile &f, void *data);
int drm_ioctl_syncobj_timeline_wait(DeviceFile &f, void *data);
int drm_ioctl_syncobj_reset(DeviceFile &f, void *data);
int drm_ioctl_syncobj_signal(DeviceFile &f, void *data);
int drm_ioctl_syncobj_timeline_signal(DeviceFile &f, void *data);
int drm_ioctl_syncobj_query(DeviceFile &f, void *data);
int drm_ioctl_syncobj_transfer(DeviceFile &f, void *data);
int drm_ioctl_syncobj_eventfd(DeviceFile &f, void *data);

// amdgpu
int amdgpu_ioctl_gem_create(DeviceFile &f, void *data);
int amdgpu_ioctl_gem_mmap(DeviceFile &f, void *data);
int amdgpu_ioctl_gem_userptr(DeviceFile &f, void *data);
int amdgpu_ioctl_gem_wait_idle(DeviceFile &f, void *data);
int amdgpu_ioctl_gem_op(DeviceFile &f, void *data);
int amdgpu_ioctl_gem_metadata(DeviceFile &f, void *data);
int amdgpu_ioctl_bo_list(DeviceFile &f, void *data);
int amdgpu_ioctl_gem_va(DeviceFile &f, void *data);
int amdgpu_ioctl_vm(DeviceFile &f, void *data);
int amdgpu_ioctl_ctx(DeviceFile &f, void *data);
int amdgpu_ioctl_sched(DeviceFile &f, void *data);
int amdgpu_ioctl_cs(DeviceFile &f, void *data);
int amdgpu_ioctl_wait_cs(DeviceFile &f, void *data);
int amdgpu_ioctl_wait_fences(DeviceFile &f, void *data);
int amdgpu_ioctl_fence_to_handle(DeviceFile &f, void *data);
int amdgpu_ioctl_info(DeviceFile &f, void *data);
int amdgpu_ioctl_userq(DeviceFile &f, void *data);
int amdgpu_ioctl_profiler(DeviceFile &f, void *data);

// Helpers shared by handlers (state lock held).
// A new sync_file fd for `fence` (its fd turns readable when the fence signals).
int make_sync_file_fd(std::shared_ptr<Fence> fence);
// A new fd for a syncobj (DRM_IOCTL_SYNCOBJ_HANDLE_TO_FD).
int make_syncobj_fd(std::shared_ptr<Syncobj> syncobj);
// Reads and resolves a BO list (stride = bo_info_size), as CS and BO_LIST do.
int read_bo_list(DeviceFile &f, uint64_t ptr, uint32_t count, uint32_t stride,
                 std::vector<std::shared_ptr<BufferObject>> &out);
// Rings a context may use for an IP: the device's rings capped at amdgpu_ctx_num_entities.
uint32_t ctx_ring_count(const Device &d, uint32_t ip);
// amdgpu_ctx_get_entity(): -EINVAL unless the IP, instance and ring exist on the device.
int validate_entity(const Device &d, uint32_t ip, uint32_t instance, uint32_t ring);
// mutex_lock(&mgr->lock): the file's context table lock, once no FREE_CTX holds the manager's
// lock for its drain (DeviceFile::ctx_mgr_held). May wait: never with the state lock held.
std::unique_lock<std::mutex> ctx_mgr_lock(DeviceFile &f);
// amdgpu_ctx_get(): the context with a reference (ContextRef), empty for an unknown id. Waits as
// ctx_mgr_lock() does; dropping the reference may release the context, which waits too (no lock
// held then either).
ContextRef ctx_get(DeviceFile &f, uint32_t ctx_id);
// amdgpu_cs_get_fence(): amdgpu_ctx_get() + amdgpu_ctx_get_fence() + amdgpu_ctx_put(): the fence
// of (context, ring, seq), null when known signaled; -EINVAL for an unknown context or entity or a
// sequence not yet emitted. Waits as ctx_get() does: never with the state lock held. `keep`: the
// context reference goes to the caller instead (amdgpu_cs_wait_ioctl() holds it across its wait).
int get_job_fence(DeviceFile &f, uint32_t ctx_id, uint32_t ip, uint32_t instance, uint32_t ring,
                  uint64_t seq, std::shared_ptr<Fence> &out, ContextRef *keep = nullptr);
// The same lookup for a CS's dependency chunk, which runs with the state lock held: it takes the
// file's context lock only, neither waits for a FREE_CTX in progress nor takes a reference.
int lookup_job_fence(DeviceFile &f, uint32_t ctx_id, uint32_t ip, uint32_t instance, uint32_t ring,
                     uint64_t seq, std::shared_ptr<Fence> &out);
// Whether f is its primary node's DRM master (drm_gem_names.cpp; state lock held).
bool drm_file_is_master(const DeviceFile &f);
// Whether the caller may ask for high scheduling priority (CAP_SYS_NICE, as the kernel checks).
bool caller_has_sys_nice();

}  // namespace rvgl::emu
