// DRM_AMDGPU_CTX (amdgpu_ctx.c) and DRM_AMDGPU_SCHED.
#include <amdgpu_drm.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iterator>

#include "amdgpu/uapi/amdgpu_drm_ext.h"
#include "core/device.h"
#include "ioctl/handlers.h"
#include "sync/wait_queue.h"

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

// amdgpu_ctx.c amdgpu_ctx_num_entities: the scheduler entities a context has per IP. HW_IP_INFO
// caps available_rings at it (amdgpu_kms.c amdgpu_hw_ip_info) and amdgpu_ctx_get_entity refuses
// a ring index past it, whatever number of hardware rings the part has.
constexpr uint32_t kCtxNumEntities[] = {
    1,  // GFX
    4,  // COMPUTE
    2,  // DMA
    1,  // UVD
    1,  // VCE
    1,  // UVD_ENC
    1,  // VCN_DEC
    1,  // VCN_ENC
    1,  // VCN_JPEG
    1,  // VPE
};

}  // namespace

uint32_t ctx_ring_count(const Device &d, uint32_t ip) {
  if (ip >= std::size(kCtxNumEntities)) return 0;
  return std::min(d.ring_count(ip), kCtxNumEntities[ip]);
}

int validate_entity(const Device &d, uint32_t ip, uint32_t instance, uint32_t ring) {
  if (ip >= AMDGPU_HW_IP_NUM || instance != 0) return -EINVAL;
  if (ring >= ctx_ring_count(d, ip)) return -EINVAL;
  return 0;
}

std::unique_lock<std::mutex> ctx_mgr_lock(DeviceFile &f) {
  for (;;) {
    std::unique_lock lk(f.contexts.mutex());
    if (!f.ctx_mgr_held.load()) return lk;
    lk.unlock();
    std::unique_lock dlk(FenceDomain::mutex());
    FenceDomain::wait_until(
        dlk, never(), [&] { return !f.ctx_mgr_held.load(); },
        [&](Waiter &w) { w.subscribe_locked(f.ctx_mgr_released, nullptr); });  // f outlives us
  }
}

namespace {
// idr_find() under mgr->lock, for the CTX ops that use the context under that lock and take no
// reference.
std::shared_ptr<Context> ctx_find(DeviceFile &f, uint32_t ctx_id) {
  auto lk = ctx_mgr_lock(f);
  return f.contexts.get_locked(ctx_id);
}
}  // namespace

ContextRef ctx_get(DeviceFile &f, uint32_t ctx_id) {
  auto lk = ctx_mgr_lock(f);
  std::shared_ptr<Context> ctx = f.contexts.get_locked(ctx_id);
  if (!ctx) return {};
  ctx->refs.fetch_add(1, std::memory_order_relaxed);  // kref_get()
  return ContextRef(std::move(ctx));
}

int amdgpu_ioctl_ctx(DeviceFile &f, void *data) {
  auto *a = static_cast<drm_amdgpu_ctx *>(data);
  const auto in = a->in;
  Device &d = f.device;
  // No state lock: the kernel takes only the file's ctx_mgr lock here (amdgpu_ctx_ioctl), which
  // the context table's own lock stands for, so a query never waits for a CS in progress; but
  // each op waits for a FREE_CTX that holds it (ctx_mgr_lock()).
  switch (in.op) {
    case AMDGPU_CTX_OP_ALLOC_CTX: {
      if (!priority_valid(in.priority)) return -EINVAL;
      // amdgpu_ctx_priority_permit(): above NORMAL needs CAP_SYS_NICE or the DRM master
      // (drm_is_current_master(): not any primary file).
      if (in.priority > AMDGPU_CTX_PRIORITY_NORMAL && !drm_file_is_master(f) &&
          !caller_has_sys_nice())
        return -EACCES;
      auto ctx = std::make_shared<Context>(in.priority, d.resets().gpu_resets.load(),
                                           d.resets().vram_lost.load());
      ctx->reset_counter_query.store(ctx->reset_counter_at_create());
      std::memset(a, 0, sizeof(*a));
      auto lk = ctx_mgr_lock(f);
      a->out.alloc.ctx_id = f.contexts.insert_locked(std::move(ctx));
      return 0;
    }
    case AMDGPU_CTX_OP_FREE_CTX: {
      // amdgpu_ctx_free(): under mgr->lock, idr_remove() and kref_put(amdgpu_ctx_do_release). The
      // release (the last reference: no CS or WAIT_CS of the context in progress, else that
      // ioctl's end releases it) waits for every entity to hand its queued jobs to the ring
      // (drm_sched_entity_destroy -> drm_sched_entity_flush, no timeout), mgr->lock still held.
      std::shared_ptr<Context> gone;
      {
        auto lk = ctx_mgr_lock(f);
        if (!f.contexts.erase_locked(in.ctx_id, &gone)) return -EINVAL;
        if (gone->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return 0;
        f.ctx_mgr_held.store(true);
      }
      gone->flush_entities();
      std::lock_guard dlk(FenceDomain::mutex());
      f.ctx_mgr_held.store(false);
      f.ctx_mgr_released.wake_all_locked();
      return 0;
    }
    case AMDGPU_CTX_OP_QUERY_STATE:
    case AMDGPU_CTX_OP_QUERY_STATE2: {
      // amdgpu_ctx_query()/amdgpu_ctx_query2(): idr_find() under mgr->lock.
      const std::shared_ptr<Context> pc = ctx_find(f, in.ctx_id);
      if (!pc) return -EINVAL;
      Context &c = *pc;
      const uint32_t resets = d.resets().gpu_resets.load();
      // amdgpu_ctx_query2(): RESET is the device's reset counter moved since creation, nothing
      // of the context's own.
      const bool reset = c.reset_counter_at_create() != resets;
      const bool vram_lost = c.vram_lost_counter_at_create() != d.resets().vram_lost.load();
      std::memset(a, 0, sizeof(*a));
      if (in.op == AMDGPU_CTX_OP_QUERY_STATE) {
        // amdgpu_ctx_query(): UNKNOWN_RESET once per change of the device's reset counter since
        // the last query (or since creation), NO_RESET otherwise; never GUILTY or INNOCENT.
        a->out.state.reset_status = c.reset_counter_query.exchange(resets) == resets
                                        ? AMDGPU_CTX_NO_RESET
                                        : AMDGPU_CTX_UNKNOWN_RESET;
        // RVGL_EMU_RECOVERY_COUNT_AT_QUERY: the timeout handler counts a recovery right after this
        // query read the counter, so it answered without it.
        if (const uint32_t n = d.resets().counts_at_query.exchange(0))
          d.resets().gpu_resets.fetch_add(n);
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
      const std::shared_ptr<Context> pc = ctx_find(f, in.ctx_id);  // amdgpu_ctx_stable_pstate()
      if (!pc) return -EINVAL;
      if (in.op == AMDGPU_CTX_OP_SET_STABLE_PSTATE) {
        if (in.flags & ~AMDGPU_CTX_STABLE_PSTATE_FLAGS_MASK) return -EINVAL;
        if ((in.flags & AMDGPU_CTX_STABLE_PSTATE_FLAGS_MASK) > AMDGPU_CTX_STABLE_PSTATE_PEAK)
          return -EINVAL;
        pc->stable_pstate.store(in.flags & AMDGPU_CTX_STABLE_PSTATE_FLAGS_MASK);
        std::memset(a, 0, sizeof(*a));
        return 0;
      }
      const uint32_t v = pc->stable_pstate.load();
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
