// GEM_VA (amdgpu_gem_va_ioctl / amdgpu_vm_bo_map et al.) and the VM ioctl.
#include <amdgpu_drm.h>

#include <cerrno>

#include "amdgpu/uapi/amdgpu_drm_ext.h"
#include "core/emulator.h"
#include "ioctl/handlers.h"
#include "memory/va_layout.h"

namespace rvgl::emu {

int amdgpu_ioctl_gem_va(DeviceFile &f, void *data) {
  const auto &a = *static_cast<drm_amdgpu_gem_va *>(data);
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
