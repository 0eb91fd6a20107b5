// Waiting on submissions: WAIT_CS, WAIT_FENCES (absolute timeouts, as amdgpu_gem_timeout takes
// them) and FENCE_TO_HANDLE.
#include <amdgpu_drm.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "core/device.h"
#include "core/emulator.h"
#include "ioctl/handlers.h"
#include "sync/fence.h"
#include "sync/syncobj.h"
#include "util/user_memory.h"

namespace rvgl::emu {

int lookup_job_fence(DeviceFile &f, uint32_t ctx_id, uint32_t ip, uint32_t instance, uint32_t ring,
                     uint64_t seq, std::shared_ptr<Fence> &out) {
  if (int r = validate_entity(f.device, ip, instance, ring)) return r;
  std::lock_guard lk(f.contexts.mutex());
  auto ctx = f.contexts.get_locked(ctx_id);
  if (!ctx) return -EINVAL;
  // amdgpu_ctx_get_entity(): an entity whose last popped job failed answers that error.
  if (int r = ctx->entity_error({ip, instance, ring})) return r;
  return ctx->get_fence({ip, instance, ring}, seq, out);
}

int get_job_fence(DeviceFile &f, uint32_t ctx_id, uint32_t ip, uint32_t instance, uint32_t ring,
                  uint64_t seq, std::shared_ptr<Fence> &out, ContextRef *keep) {
  ContextRef ctx = ctx_get(f, ctx_id);
  if (!ctx) return -EINVAL;
  if (int r = validate_entity(f.device, ip, instance, ring)) return r;
  if (int r = ctx->entity_error({ip, instance, ring})) return r;  // amdgpu_ctx_get_entity()
  {
    std::lock_guard lk(f.contexts.mutex());  // the context's ring_lock
    if (int r = ctx->get_fence({ip, instance, ring}, seq, out)) return r;
  }
  if (keep) *keep = std::move(ctx);
  return 0;
}

int amdgpu_ioctl_wait_cs(DeviceFile &f, void *data) {
  auto *a = static_cast<drm_amdgpu_wait_cs *>(data);
  const auto in = a->in;
  // amdgpu_cs_wait_ioctl(): the context reference is held across the wait (amdgpu_ctx_put() after
  // it), so a FREE_CTX meanwhile leaves the release, and its drain, to this ioctl's end.
  ContextRef ctx;
  std::shared_ptr<Fence> fence;
  if (int r =
          get_job_fence(f, in.ctx_id, in.ip_type, in.ip_instance, in.ring, in.handle, fence, &ctx))
    return r;
  bool signaled = true;
  if (fence) {
    signaled = fence->wait(deadline_from_amdgpu_timeout(in.timeout));
    if (signaled && fence->error()) return fence->error();
  }
  std::memset(a, 0, sizeof(*a));
  a->out.status = signaled ? 0 : 1;
  return 0;
}

int amdgpu_ioctl_wait_fences(DeviceFile &f, void *data) {
  auto *a = static_cast<drm_amdgpu_wait_fences *>(data);
  const auto in = a->in;
  if (in.fence_count > (1u << 16)) return -EINVAL;
  std::vector<drm_amdgpu_fence> user(in.fence_count);
  if (copy_from_user(user.data(), in.fences, user.size() * sizeof(drm_amdgpu_fence)))
    return -EFAULT;
  std::vector<std::shared_ptr<Fence>> fences(user.size());
  for (size_t i = 0; i < user.size(); ++i)
    if (int r = get_job_fence(f, user[i].ctx_id, user[i].ip_type, user[i].ip_instance, user[i].ring,
                              user[i].seq_no, fences[i]))
      return r;
  const Deadline deadline = deadline_from_amdgpu_timeout(in.timeout_ns);
  uint32_t first = 0;
  bool signaled = true;
  int err = 0;
  if (in.wait_all) {
    for (auto &fence : fences) {
      if (!fence) continue;
      if (!fence->wait(deadline)) {
        signaled = false;
        break;
      }
      if (int e = fence->error()) return e;
    }
  } else {
    std::unique_lock lk(FenceDomain::mutex());
    signaled = FenceDomain::wait_until(
        lk, deadline,
        [&] {
          for (size_t i = 0; i < fences.size(); ++i)
            if (!fences[i] || fences[i]->is_signaled_locked()) {
              first = static_cast<uint32_t>(i);
              return true;
            }
          return fences.empty();
        },
        [&](Waiter &w) {
          for (const auto &fence : fences)
            Fence::subscribe_locked(w, fence);
        });
    if (signaled && first < fences.size() && fences[first]) err = fences[first]->error_locked();
  }
  std::memset(a, 0, sizeof(*a));
  a->out.status = signaled ? 1 : 0;
  a->out.first_signaled = first;
  return err;
}

int amdgpu_ioctl_fence_to_handle(DeviceFile &f, void *data) {
  auto *a = static_cast<drm_amdgpu_fence_to_handle *>(data);
  const auto in = a->in;
  std::shared_ptr<Fence> fence;
  if (int r = get_job_fence(f, in.fence.ctx_id, in.fence.ip_type, in.fence.ip_instance,
                            in.fence.ring, in.fence.seq_no, fence))
    return r;
  std::lock_guard lk(Emulator::get().mutex());  // the fd helpers below want it
  if (!fence) fence = Fence::signaled();
  std::memset(a, 0, sizeof(*a));
  switch (in.what) {
    case AMDGPU_FENCE_TO_HANDLE_GET_SYNCOBJ:
    case AMDGPU_FENCE_TO_HANDLE_GET_SYNCOBJ_FD: {
      auto s = std::make_shared<Syncobj>();
      {
        std::lock_guard flk(FenceDomain::mutex());
        s->replace_locked(fence);
      }
      if (in.what == AMDGPU_FENCE_TO_HANDLE_GET_SYNCOBJ) {
        a->out.handle = f.syncobjs.insert(std::move(s));
        return 0;
      }
      const int fd = make_syncobj_fd(std::move(s));
      if (fd < 0) return fd;
      a->out.handle = static_cast<uint32_t>(fd);
      return 0;
    }
    case AMDGPU_FENCE_TO_HANDLE_GET_SYNC_FILE_FD: {
      const int fd = make_sync_file_fd(fence);
      if (fd < 0) return fd;
      a->out.handle = static_cast<uint32_t>(fd);
      return 0;
    }
    default:
      return -EINVAL;
  }
}

}  // namespace rvgl::emu
