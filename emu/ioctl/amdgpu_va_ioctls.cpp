// GEM_VA (amdgpu_gem_va_ioctl / amdgpu_vm_bo_map et al.) and the VM ioctl.
#include <amdgpu_drm.h>

#include <cerrno>

#include "amdgpu/uapi/amdgpu_drm_ext.h"
#include "core/emulator.h"
#include "ioctl/handlers.h"
#include "memory/va_layout.h"
#include "sync/fence.h"
#include "sync/syncobj.h"
#include "sync/wait_queue.h"

namespace rvgl::emu {

namespace {

int do_gem_va(DeviceFile &f, const rvgl_drm_amdgpu_gem_va &a);

}  // namespace

int amdgpu_ioctl_gem_va(DeviceFile &f, void *data) {
  const auto &a = *static_cast<rvgl_drm_amdgpu_gem_va *>(data);
  // Input fences (the operation waits for them first) are not modelled: refused rather than
  // ignored, so no caller here can believe it was ordered after them.
  if (a.num_syncobj_handles || a.input_fence_syncobj_handles) return -EINVAL;
  std::shared_ptr<Syncobj> out;
  std::shared_ptr<Fence> ran;  // the fence for an update with nothing before it
  if (a.vm_timeline_syncobj_out) {
    // amdgpu_gem_update_timeline_node(), before the operation: an unknown handle is -ENOENT,
    // and the chain node is allocated then, so nothing can fail once the mapping has changed.
    out = f.syncobjs.get(a.vm_timeline_syncobj_out);
    if (!out) return -ENOENT;
    ran = Fence::signaled();
    std::lock_guard flk(FenceDomain::mutex());
    if (a.vm_timeline_point) out->reserve_point_locked();
  }
  const int r = do_gem_va(f, a);
  // amdgpu_gem_va_ioctl(): an update delayed to the next CS (AMDGPU_VM_DELAY_UPDATE) runs none
  // now, so no point is added.
  if (r || !out || (a.flags & AMDGPU_VM_DELAY_UPDATE)) return r;
  // The fence of the update this operation queued, which runs after every update before it
  // (amdgpu_gem_va_update_vm(), then drm_syncobj_add_point() / drm_syncobj_replace_fence()).
  std::shared_ptr<Fence> update = f.vm->update_fence();
  if (!update) update = std::move(ran);
  std::lock_guard flk(FenceDomain::mutex());
  if (a.vm_timeline_point)
    out->add_point_locked(a.vm_timeline_point, std::move(update));
  else
    out->replace_locked(std::move(update));
  return 0;
}

namespace {

int do_gem_va(DeviceFile &f, const rvgl_drm_amdgpu_gem_va &a) {
  const uint32_t valid_flags = AMDGPU_VM_DELAY_UPDATE | AMDGPU_VM_PAGE_READABLE |
                               AMDGPU_VM_PAGE_WRITEABLE | AMDGPU_VM_PAGE_EXECUTABLE |
                               AMDGPU_VM_MTYPE_MASK | RVGL_AMDGPU_VM_PAGE_NOALLOC;
  const uint32_t prt_flags = AMDGPU_VM_DELAY_UPDATE | AMDGPU_VM_PAGE_PRT;
  uint64_t va_addr = a.va_address;
  if (va_addr < va::kReservedBottom) return -EINVAL;
  if (va_addr >= va::kHoleStart && va_addr < va::kHoleEnd) return -EINVAL;
  va_addr &= va::kHoleMask;
  if (va_addr + a.map_size < va_addr || va_addr + a.map_size > va::kUsableTop) return -EINVAL;
  if ((a.flags & ~valid_flags) && (a.flags & ~prt_flags)) return -EINVAL;
  switch (a.operation) {
    case AMDGPU_VA_OP_MAP:
    case AMDGPU_VA_OP_UNMAP:
    case AMDGPU_VA_OP_CLEAR:
    case AMDGPU_VA_OP_REPLACE:
      break;
    default:
      return -EINVAL;
  }
  std::lock_guard lk(Emulator::get().mutex());
  std::shared_ptr<BufferObject> bo;
  const bool prt = a.flags & AMDGPU_VM_PAGE_PRT;
  if (a.operation != AMDGPU_VA_OP_CLEAR && !prt) {
    bo = f.bo(a.handle);
    if (!bo) return -ENOENT;
  }
  // amdgpu_vm_verify_parameters(): GPU-page alignment, no wrap, inside the object and the VM.
  if (a.operation != AMDGPU_VA_OP_UNMAP) {
    if ((va_addr | a.offset_in_bo | a.map_size) & (va::kGpuPageSize - 1)) return -EINVAL;
    if (a.map_size == 0 || a.offset_in_bo + a.map_size < a.offset_in_bo) return -EINVAL;
    if (bo && a.offset_in_bo + a.map_size > bo->size()) return -EINVAL;
  }
  switch (a.operation) {
    case AMDGPU_VA_OP_MAP:
      return f.vm->map(bo, va_addr, a.offset_in_bo, a.map_size, a.flags);
    case AMDGPU_VA_OP_UNMAP:
      return f.vm->unmap(bo.get(), va_addr);
    case AMDGPU_VA_OP_CLEAR:
      f.vm->clear(va_addr, a.map_size);
      return 0;
    case AMDGPU_VA_OP_REPLACE:
      return f.vm->replace(bo, va_addr, a.offset_in_bo, a.map_size, a.flags);
  }
  return -EINVAL;
}

}  // namespace

int amdgpu_ioctl_vm(DeviceFile &, void *data) {
  auto *a = static_cast<drm_amdgpu_vm *>(data);
  switch (a->in.op) {
    case AMDGPU_VM_OP_RESERVE_VMID:
    case AMDGPU_VM_OP_UNRESERVE_VMID:
      a->out.flags = 0;
      return 0;
    default:
      return -EINVAL;
  }
}

}  // namespace rvgl::emu
