// DRM_AMDGPU_CTX (amdgpu_ctx.c) and DRM_AMDGPU_SCHED.
#include <amdgpu_drm.h>

#include <cerrno>
#include <cstring>

#include "amdgpu/uapi/amdgpu_drm_ext.h"
#include "core/device.h"
#include "core/emulator.h"
#include "ioctl/handlers.h"

namespace rvgl::emu {

namespace {

bool priority_valid(int32_t p) {
  switch (p) {
    case AMDGPU_CTX_PRIORITY_UNSET:
    case AMDGPU_CTX_PRIORITY_VERY_LOW:
    case AMDGPU_CTX_PRIORITY_LOW:
    case AMDGPU_CTX_PRIORITY_NORMAL:
    case AMDGPU_CTX_PRIORITY_HIGH:
    case AMDGPU_CTX_PRIORITY_VERY_HIGH:
      return true;
    default:
      return false;
  }
}

}  // namespace

int validate_entity(const Device &d, uint32_t ip, uint32_t instance, uint32_t ring) {
  if (ip >= AMDGPU_HW_IP_NUM || instance != 0) return -EINVAL;
  if (ring >= d.ring_count(ip)) return -EINVAL;
  return 0;
}

int amdgpu_ioctl_ctx(DeviceFile &f, void *data) {
  auto *a = static_cast<drm_amdgpu_ctx *>(data);
  const auto in = a->in;
  Device &d = f.device;
  std::lock_guard lk(Emulator::get().mutex());
  switch (in.op) {
    case AMDGPU_CTX_OP_ALLOC_CTX: {
      if (!priority_valid(in.priority)) return -EINVAL;
      // amdgpu_ctx_priority_permit(): above NORMAL needs CAP_SYS_NICE (or DRM master).
      if (in.priority > AMDGPU_CTX_PRIORITY_NORMAL && !f.primary && !caller_has_sys_nice())
        return -EACCES;
      auto ctx = std::make_shared<Context>(in.priority, d.resets().gpu_resets.load(),
                                           d.resets().vram_lost.load());
      std::memset(a, 0, sizeof(*a));
      a->out.alloc.ctx_id = f.contexts.insert(std::move(ctx));
      return 0;
    }
    case AMDGPU_CTX_OP_FREE_CTX: {
      std::shared_ptr<Context> gone;
      return f.contexts.erase(in.ctx_id, &gone) ? 0 : -EINVAL;
    }
    case AMDGPU_CTX_OP_QUERY_STATE:
    case AMDGPU_CTX_OP_QUERY_STATE2: {
      auto *pc = f.contexts.find(in.ctx_id);
      if (!pc) return -EINVAL;
      const Context &c = **pc;
      const bool reset =
          c.reset_seen.load() || c.reset_counter_at_create() != d.resets().gpu_resets.load();
      const bool vram_lost = c.vram_lost_counter_at_create() != d.resets().vram_lost.load();
      std::memset(a, 0, sizeof(*a));
      if (in.op == AMDGPU_CTX_OP_QUERY_STATE) {
        a->out.state.reset_status = c.guilty.load() ? AMDGPU_CTX_GUILTY_RESET
                                    : reset         ? AMDGPU_CTX_INNOCENT_RESET
                                                    : AMDGPU_CTX_NO_RESET;
        return 0;
      }
      uint64_t flags = 0;
      if (reset) flags |= AMDGPU_CTX_QUERY2_FLAGS_RESET;
      if (vram_lost) flags |= AMDGPU_CTX_QUERY2_FLAGS_VRAMLOST;
      if (c.guilty.load()) flags |= AMDGPU_CTX_QUERY2_FLAGS_GUILTY;
      a->out.state.flags = flags;
      return 0;
    }
    case AMDGPU_CTX_OP_GET_STABLE_PSTATE:
    case AMDGPU_CTX_OP_SET_STABLE_PSTATE: {
      auto *pc = f.contexts.find(in.ctx_id);
      if (!pc) return -EINVAL;
      if (in.op == AMDGPU_CTX_OP_SET_STABLE_PSTATE) {
        if (in.flags & ~AMDGPU_CTX_STABLE_PSTATE_FLAGS_MASK) return -EINVAL;
        if ((in.flags & AMDGPU_CTX_STABLE_PSTATE_FLAGS_MASK) > AMDGPU_CTX_STABLE_PSTATE_PEAK)
          return -EINVAL;
        (*pc)->stable_pstate = in.flags & AMDGPU_CTX_STABLE_PSTATE_FLAGS_MASK;
        std::memset(a, 0, sizeof(*a));
        return 0;
      }
      const uint32_t v = (*pc)->stable_pstate;
      std::memset(a, 0, sizeof(*a));
      a->out.pstate.flags = v;
      return 0;
    }
    default:
      return -EINVAL;
  }
}

int amdgpu_ioctl_sched(DeviceFile &, void *data) {
  auto *a = static_cast<drm_amdgpu_sched *>(data);
  if (a->in.op != AMDGPU_SCHED_OP_PROCESS_PRIORITY_OVERRIDE &&
      a->in.op != AMDGPU_SCHED_OP_CONTEXT_PRIORITY_OVERRIDE)
    return -EINVAL;
  return priority_valid(a->in.priority) ? 0 : -EINVAL;
}

}  // namespace rvgl::emu
