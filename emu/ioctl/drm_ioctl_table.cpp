#include "ioctl/drm_ioctl_table.h"

#include <amdgpu_drm.h>
#include <drm.h>
#include <sys/ioctl.h>

#include <array>

#include "amdgpu/uapi/amdgpu_drm_ext.h"
#include "ioctl/drm_uapi_ext.h"

namespace rvgl::emu {

namespace {

#define CORE(name, handler, flags) \
  { _IOC_NR(DRM_IOCTL_##name), #name, DRM_IOCTL_##name, flags, handler }
#define AMD(name, handler) \
  { _IOC_NR(DRM_IOCTL_AMDGPU_##name), #name, DRM_IOCTL_AMDGPU_##name, kRenderAllow, handler }

constexpr DrmIoctl kIoctls[] = {
    CORE(VERSION, drm_ioctl_version, kRenderAllow),
    CORE(GET_UNIQUE, drm_ioctl_get_unique, 0),
    CORE(GET_MAGIC, drm_ioctl_get_magic, 0),
    CORE(GET_CLIENT, drm_ioctl_get_client, 0),
    CORE(AUTH_MAGIC, drm_ioctl_auth_magic, 0),
    CORE(GET_CAP, drm_ioctl_get_cap, kRenderAllow),
    CORE(SET_CLIENT_CAP, drm_ioctl_set_client_cap, 0),
    CORE(GEM_CLOSE, drm_ioctl_gem_close, kRenderAllow),
    CORE(GEM_FLINK, drm_ioctl_gem_flink, 0),
    CORE(GEM_OPEN, drm_ioctl_gem_open, 0),
    CORE(PRIME_HANDLE_TO_FD, drm_ioctl_prime_handle_to_fd, kRenderAllow),
    CORE(PRIME_FD_TO_HANDLE, drm_ioctl_prime_fd_to_handle, kRenderAllow),
    CORE(SYNCOBJ_CREATE, drm_ioctl_syncobj_create, kRenderAllow),
    CORE(SYNCOBJ_DESTROY, drm_ioctl_syncobj_destroy, kRenderAllow),
    CORE(SYNCOBJ_HANDLE_TO_FD, drm_ioctl_syncobj_handle_to_fd, kRenderAllow),
    CORE(SYNCOBJ_FD_TO_HANDLE, drm_ioctl_syncobj_fd_to_handle, kRenderAllow),
    CORE(SYNCOBJ_WAIT, drm_ioctl_syncobj_wait, kRenderAllow),
    CORE(SYNCOBJ_RESET, drm_ioctl_syncobj_reset, kRenderAllow),
    CORE(SYNCOBJ_SIGNAL, drm_ioctl_syncobj_signal, kRenderAllow),
    CORE(SYNCOBJ_TIMELINE_WAIT, drm_ioctl_syncobj_timeline_wait, kRenderAllow),
    CORE(SYNCOBJ_QUERY, drm_ioctl_syncobj_query, kRenderAllow),
    CORE(SYNCOBJ_TRANSFER, drm_ioctl_syncobj_transfer, kRenderAllow),
    CORE(SYNCOBJ_TIMELINE_SIGNAL, drm_ioctl_syncobj_timeline_signal, kRenderAllow),
    // drm_ioctl.c: DRM_IOCTL_DEF(DRM_IOCTL_SYNCOBJ_EVENTFD, ..., DRM_RENDER_ALLOW) (Linux 6.6).
    {kDrmSyncobjEventfdNr, "SYNCOBJ_EVENTFD", kDrmIoctlSyncobjEventfd, kRenderAllow,
     drm_ioctl_syncobj_eventfd},
    AMD(GEM_CREATE, amdgpu_ioctl_gem_create),
    AMD(GEM_MMAP, amdgpu_ioctl_gem_mmap),
    AMD(CTX, amdgpu_ioctl_ctx),
    AMD(BO_LIST, amdgpu_ioctl_bo_list),
    AMD(CS, amdgpu_ioctl_cs),
    AMD(INFO, amdgpu_ioctl_info),
    AMD(GEM_METADATA, amdgpu_ioctl_gem_metadata),
    AMD(GEM_WAIT_IDLE, amdgpu_ioctl_gem_wait_idle),
    // The kernel's structure is Linux 6.16's longer one; a caller with the 2.4.114 one has the
    // rest zeroed (dispatch.cpp, as drm_ioctl()).
    {_IOC_NR(RVGL_DRM_IOCTL_AMDGPU_GEM_VA), "GEM_VA", RVGL_DRM_IOCTL_AMDGPU_GEM_VA, kRenderAllow,
     amdgpu_ioctl_gem_va},
    AMD(WAIT_CS, amdgpu_ioctl_wait_cs),
    AMD(GEM_OP, amdgpu_ioctl_gem_op),
    AMD(GEM_USERPTR, amdgpu_ioctl_gem_userptr),
    AMD(WAIT_FENCES, amdgpu_ioctl_wait_fences),
    AMD(VM, amdgpu_ioctl_vm),
    AMD(FENCE_TO_HANDLE, amdgpu_ioctl_fence_to_handle),
    // SCHED needs DRM master: a render node refuses it (amdgpu_drv.c, DRM_MASTER).
    {_IOC_NR(DRM_IOCTL_AMDGPU_SCHED), "SCHED", DRM_IOCTL_AMDGPU_SCHED, 0, amdgpu_ioctl_sched},
    {_IOC_NR(RVGL_DRM_IOCTL_AMDGPU_USERQ), "USERQ", RVGL_DRM_IOCTL_AMDGPU_USERQ, kRenderAllow,
     amdgpu_ioctl_userq},
    {_IOC_NR(RVGL_DRM_IOCTL_AMDGPU_PROFILER), "PROFILER", RVGL_DRM_IOCTL_AMDGPU_PROFILER,
     kRenderAllow, amdgpu_ioctl_profiler},
};

#undef CORE
#undef AMD

constexpr uint32_t kNrCount = 1u << _IOC_NRBITS;
static_assert([] {
  for (const auto &e : kIoctls)
    if (e.nr >= kNrCount) return false;
  return true;
}());

}  // namespace

// Indexed by number, as drm_ioctl() indexes drm_ioctls[] (and the driver's table past
// DRM_COMMAND_BASE): every ioctl of every thread looks here, so no scan.
const DrmIoctl *find_drm_ioctl(uint32_t nr) {
  static const auto *const by_nr = [] {
    auto *t = new std::array<const DrmIoctl *, kNrCount>{};  // never destroyed: used during exit
    for (const auto &e : kIoctls)
      (*t)[e.nr] = &e;
    return t;
  }();
  return nr < kNrCount ? (*by_nr)[nr] : nullptr;
}

}  // namespace rvgl::emu
