// DRM_AMDGPU_USERQ (amdgpu_userq.c, mes_userqueue.c): argument checks in the kernel's order, then
// a UserQueue that runs when its doorbell is written. QUERY_STATUS is the op proposed on amd-gfx
// (see amdgpu_drm_ext.h); mainline answers it -EINVAL.
#include <amdgpu_drm.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "amdgpu/uapi/amdgpu_drm_ext.h"
#include "core/device.h"
#include "core/emulator.h"
#include "ioctl/handlers.h"
#include "memory/va_layout.h"
#include "util/user_memory.h"

namespace rvgl::emu {

namespace {

constexpr uint64_t kInvalidOffset = ~0ull;  // AMDGPU_BO_INVALID_OFFSET

// amdgpu_userq_input_va_validate(): [addr, addr + size - 1] (addr with the GMC hole bits masked
// off) inside one mapping.
bool va_valid(const GpuVm &vm, uint64_t va, uint64_t size) {
  const uint64_t start = va & va::kHoleMask;
  return size && start + (size - 1) >= start && vm.covered_by_one_mapping(start, size);
}

int check_args(const rvgl_drm_amdgpu_userq_in &in) {
  switch (in.op) {
    case RVGL_AMDGPU_USERQ_OP_CREATE:
      if (in.flags & ~(RVGL_AMDGPU_USERQ_CREATE_FLAGS_QUEUE_PRIORITY_MASK |
                       RVGL_AMDGPU_USERQ_CREATE_FLAGS_QUEUE_SECURE))
        return -EINVAL;
      if (in.ip_type != AMDGPU_HW_IP_GFX && in.ip_type != AMDGPU_HW_IP_DMA &&
          in.ip_type != AMDGPU_HW_IP_COMPUTE)
        return -EINVAL;
      if (in.flags & RVGL_AMDGPU_USERQ_CREATE_FLAGS_QUEUE_SECURE) return -EINVAL;  // no TMZ
      if (in.queue_va == kInvalidOffset || in.queue_va == 0 || in.queue_size == 0) return -EINVAL;
      if (in.queue_size & (in.queue_size - 1)) return -EINVAL;  // a power of 2
      if (in.queue_size < va::kGpuPageSize) return -EINVAL;
      if (!in.wptr_va || !in.rptr_va) return -EINVAL;
      return 0;
    case RVGL_AMDGPU_USERQ_OP_FREE:
    case RVGL_AMDGPU_USERQ_OP_QUERY_STATUS:
      if (in.ip_type || in.doorbell_handle || in.doorbell_offset || in.flags || in.queue_va ||
          in.queue_size || in.rptr_va || in.wptr_va || in.mqd || in.mqd_size)
        return -EINVAL;
      return 0;
    default:
      return -EINVAL;
  }
}

// The IP-specific MQD: its size must match exactly and its addresses must be mapped.
int check_mqd(DeviceFile &f, const rvgl_drm_amdgpu_userq_in &in) {
  const UserqAreas &areas = f.device.profile().userq_areas;
  auto mapped = [&](uint64_t va, uint64_t size) { return va_valid(*f.vm, va, size); };
  switch (in.ip_type) {
    case AMDGPU_HW_IP_COMPUTE: {
      rvgl_drm_amdgpu_userq_mqd_compute_gfx11 m;
      if (in.mqd_size != sizeof(m)) return -EINVAL;
      if (copy_from_user(&m, in.mqd, sizeof(m))) return -EFAULT;
      return mapped(m.eop_va, areas.compute_eop_size) ? 0 : -EINVAL;
    }
    case AMDGPU_HW_IP_DMA: {
      rvgl_drm_amdgpu_userq_mqd_sdma_gfx11 m;
      if (in.mqd_size != sizeof(m)) return -EINVAL;
      if (copy_from_user(&m, in.mqd, sizeof(m))) return -EFAULT;
      return mapped(m.csa_va, areas.sdma_csa_size) ? 0 : -EINVAL;
    }
    case AMDGPU_HW_IP_GFX: {
      rvgl_drm_amdgpu_userq_mqd_gfx11 m;
      if (in.mqd_size != sizeof(m)) return -EINVAL;
      if (copy_from_user(&m, in.mqd, sizeof(m))) return -EFAULT;
      return mapped(m.shadow_va, areas.gfx_shadow_size) && mapped(m.csa_va, areas.gfx_csa_size)
                 ? 0
                 : -EINVAL;
    }
  }
  return -EINVAL;
}

int create(DeviceFile &f, rvgl_drm_amdgpu_userq &args) {
  const auto in = args.in;
  const uint32_t priority = in.flags & RVGL_AMDGPU_USERQ_CREATE_FLAGS_QUEUE_PRIORITY_MASK;
  // amdgpu_userq_priority_permit(): as for kernel contexts, CAP_SYS_NICE or the DRM master.
  if (priority >= RVGL_AMDGPU_USERQ_CREATE_FLAGS_QUEUE_PRIORITY_HIGH && !drm_file_is_master(f) &&
      !caller_has_sys_nice())
    return -EACCES;
  const IpBlock *blk = f.device.ip_block(in.ip_type);
  if (!blk || !blk->userq_slots) return -EINVAL;
  // Not a kernel check: the emulator caps rings at 64 MiB so a worker never buffers more.
  if (in.queue_size > (64u << 20)) return -EINVAL;
  // amdgpu_userq_input_va_validate(): the ring and both pointers inside existing mappings.
  if (!va_valid(*f.vm, in.queue_va, in.queue_size) ||
      !va_valid(*f.vm, in.rptr_va, va::kGpuPageSize) ||
      !va_valid(*f.vm, in.wptr_va, va::kGpuPageSize))
    return -EINVAL;
  // amdgpu_userq_get_doorbell_index(): compute, SDMA and GFX doorbells are 64-bit, so the offset
  // counts 8-byte doorbells. Pinning to the DOORBELL domain fails for any other object.
  auto doorbell = f.bo(in.doorbell_handle);
  if (!doorbell || doorbell->current_domain() != RVGL_AMDGPU_GEM_DOMAIN_DOORBELL) return -EINVAL;
  if ((uint64_t{in.doorbell_offset} + 1) * RVGL_AMDGPU_USERQ_DOORBELL_SIZE > doorbell->size())
    return -EINVAL;
  if (int r = check_mqd(f, in)) return r;
  // mes_userq_create_wptr_mapping(): the object behind wptr_va goes into GART, one page at most.
  auto wptr_bo = f.vm->bo_at(in.wptr_va & va::kHoleMask);
  if (!wptr_bo || wptr_bo->size() > va::kGpuPageSize) return -EINVAL;
  // amdgpu_userq_create(): the queue is filed under its absolute doorbell
  // (amdgpu_doorbell_index_on_bar()); xa_insert refuses a doorbell already taken. Doorbell objects
  // are per file here, so the file's own queues are all that can share one.
  bool taken = false;
  f.userqs.for_each([&](uint32_t, const std::shared_ptr<UserQueue> &other) {
    taken = taken ||
            (other->doorbell() == doorbell.get() && other->doorbell_offset() == in.doorbell_offset);
  });
  if (taken) return -EBUSY;

  UserQueue::Params p;
  p.ip = in.ip_type;
  p.vm = f.vm;
  p.queue_va = in.queue_va;
  p.queue_size = in.queue_size;
  p.rptr_va = in.rptr_va;
  p.wptr_va = in.wptr_va;
  p.doorbell = std::move(doorbell);
  p.doorbell_offset = in.doorbell_offset;
  p.profile = &f.device.profile();
  auto q = std::make_shared<UserQueue>(std::move(p));
  if (!q->start()) return -ENOMEM;
  std::memset(&args, 0, sizeof(args));
  args.out.queue_id = f.userqs.insert(std::move(q));
  return 0;
}

// The proposed amdgpu_userq_query_status(): HUNG once MES stopped the queue. VRAM is never lost
// on the emulated device, so VRAMLOST stays clear.
int query_status(DeviceFile &f, rvgl_drm_amdgpu_userq &args) {
  std::shared_ptr<UserQueue> *q = f.userqs.find(args.in.queue_id);
  if (!q) return -EINVAL;
  const bool hung = (*q)->hung();
  std::memset(&args, 0, sizeof(args));
  if (hung) args.out_qs.flags |= RVGL_AMDGPU_USERQ_QUERY_STATUS_FLAGS_HUNG;
  return 0;
}

}  // namespace

int amdgpu_ioctl_userq(DeviceFile &f, void *data) {
  auto &args = *static_cast<rvgl_drm_amdgpu_userq *>(data);
  if (check_args(args.in)) return -EINVAL;
  std::shared_ptr<UserQueue> gone;
  {
    std::lock_guard lk(Emulator::get().mutex());
    if (args.in.op == RVGL_AMDGPU_USERQ_OP_CREATE) return create(f, args);
    if (args.in.op == RVGL_AMDGPU_USERQ_OP_QUERY_STATUS) return query_status(f, args);
    // amdgpu_userq_ioctl(): __xa_erase found nothing.
    if (!f.userqs.erase(args.in.queue_id, &gone)) return -ENOENT;
  }
  gone.reset();  // stops and joins the worker outside the state lock
  return 0;
}

}  // namespace rvgl::emu
