// Object creation and management: GEM_CREATE, GEM_MMAP, GEM_USERPTR, GEM_WAIT_IDLE, GEM_OP,
// GEM_METADATA and BO_LIST (amdgpu_gem.c, amdgpu_bo_list.c).
#include <amdgpu_drm.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "amdgpu/uapi/amdgpu_drm_ext.h"
#include "core/device.h"
#include "core/emulator.h"
#include "core/runtime_knobs.h"
#include "ioctl/handlers.h"
#include "memory/mmap_registry.h"
#include "sync/fence.h"
#include "util/proc_maps.h"
#include "util/user_memory.h"

namespace rvgl::emu {

namespace {

constexpr uint64_t kPage = 4096;

// AMDGPU_GEM_CREATE_SETTABLE_MASK (amdgpu_gem.h): what userspace may ask for. VRAM_CONTIGUOUS,
// PREEMPTIBLE and CP_MQD_GFX9 are kernel-internal and refused.
constexpr uint64_t kCreateFlags =
    AMDGPU_GEM_CREATE_CPU_ACCESS_REQUIRED | AMDGPU_GEM_CREATE_NO_CPU_ACCESS |
    AMDGPU_GEM_CREATE_CPU_GTT_USWC | AMDGPU_GEM_CREATE_VRAM_CLEARED |
    AMDGPU_GEM_CREATE_VM_ALWAYS_VALID | AMDGPU_GEM_CREATE_EXPLICIT_SYNC |
    AMDGPU_GEM_CREATE_VRAM_WIPE_ON_RELEASE | AMDGPU_GEM_CREATE_ENCRYPTED |
    RVGL_AMDGPU_GEM_CREATE_GFX12_DCC | RVGL_AMDGPU_GEM_CREATE_DISCARDABLE |
    RVGL_AMDGPU_GEM_CREATE_COHERENT | RVGL_AMDGPU_GEM_CREATE_UNCACHED |
    RVGL_AMDGPU_GEM_CREATE_EXT_COHERENT;

constexpr uint64_t kDomains =
    AMDGPU_GEM_DOMAIN_CPU | AMDGPU_GEM_DOMAIN_GTT | AMDGPU_GEM_DOMAIN_VRAM | AMDGPU_GEM_DOMAIN_GDS |
    AMDGPU_GEM_DOMAIN_GWS | AMDGPU_GEM_DOMAIN_OA | RVGL_AMDGPU_GEM_DOMAIN_DOORBELL;

// The VRAM poison pattern for objects created without VRAM_CLEARED (RVGL_EMU_VRAM_POISON).
constexpr uint8_t kVramPoison = 0xcd;

}  // namespace

int amdgpu_ioctl_gem_create(DeviceFile &f, void *data) {
  auto *a = static_cast<drm_amdgpu_gem_create *>(data);
  const auto in = a->in;
  if (in.domain_flags & ~kCreateFlags) return -EINVAL;
  if (in.domains & ~kDomains) return -EINVAL;
  // No TMZ on the emulated parts (ids_flags lacks AMDGPU_IDS_FLAGS_TMZ).
  if (in.domain_flags & AMDGPU_GEM_CREATE_ENCRYPTED) return -EINVAL;
  // GDS/GWS/OA are on-chip resources the emulator does not model.
  if (in.domains & (AMDGPU_GEM_DOMAIN_GDS | AMDGPU_GEM_DOMAIN_GWS | AMDGPU_GEM_DOMAIN_OA))
    return -EINVAL;
  if (in.bo_size == 0 || in.bo_size > (1ull << 46)) return -EINVAL;
  const uint64_t size = (in.bo_size + kPage - 1) & ~(kPage - 1);

  using Pool = MemoryAccount::Pool;
  auto &account = *f.device.memory();
  Pool pool = Pool::None;
  if (in.domains & RVGL_AMDGPU_GEM_DOMAIN_DOORBELL) {
    if (in.domains != RVGL_AMDGPU_GEM_DOMAIN_DOORBELL) return -EINVAL;
    if (!account.charge(Pool::Doorbell, size)) return -ENOMEM;
    pool = Pool::Doorbell;
  } else if ((in.domains & AMDGPU_GEM_DOMAIN_VRAM) && account.charge(Pool::Vram, size)) {
    pool = Pool::Vram;
  } else if (in.domains & (AMDGPU_GEM_DOMAIN_VRAM | AMDGPU_GEM_DOMAIN_GTT)) {
    // amdgpu_gem_object_create(): a VRAM-only request that does not fit retries in GTT.
    if (!account.charge(Pool::Gtt, size)) return -ENOMEM;
    pool = Pool::Gtt;
  }
  auto backing = MemfdBacking::create("rvgl-bo", size);
  if (!backing) {
    account.release(pool, size);
    return -ENOMEM;
  }
  if (pool == Pool::Vram && knobs().vram_poison.load() &&
      !(in.domain_flags & AMDGPU_GEM_CREATE_VRAM_CLEARED))
    if (uint8_t *v = backing->view()) std::memset(v, kVramPoison, size);

  BufferObject::Params p;
  p.device = f.device.index();
  p.backing = std::move(backing);
  p.account = f.device.memory();
  p.pool = pool;
  p.size = size;
  p.alignment = in.alignment;
  p.domains = in.domains;
  p.domain_flags = in.domain_flags;
  p.owner_file = (in.domain_flags & AMDGPU_GEM_CREATE_VM_ALWAYS_VALID) ? f.id : 0;
  auto bo = std::make_shared<BufferObject>(std::move(p));
  std::lock_guard lk(Emulator::get().mutex());
  const uint32_t handle = f.handle_for(std::move(bo));
  std::memset(a, 0, sizeof(*a));
  a->out.handle = handle;
  return 0;
}

int amdgpu_ioctl_gem_mmap(DeviceFile &f, void *data) {
  auto *a = static_cast<drm_amdgpu_gem_mmap *>(data);
  std::lock_guard lk(Emulator::get().mutex());
  auto bo = f.bo(a->in.handle);
  if (!bo) return -ENOENT;
  // amdgpu_gem_mmap_ioctl: userptr objects and NO_CPU_ACCESS objects have no CPU mapping.
  if (bo->userptr() || (bo->domain_flags() & AMDGPU_GEM_CREATE_NO_CPU_ACCESS)) return -EPERM;
  const uint64_t off = mmap_registry().offset_of(bo);
  std::memset(a, 0, sizeof(*a));
  a->out.addr_ptr = off;
  return 0;
}

int amdgpu_ioctl_gem_userptr(DeviceFile &f, void *data) {
  auto *a = static_cast<drm_amdgpu_gem_userptr *>(data);
  if ((a->addr | a->size) & (kPage - 1)) return -EINVAL;
  if (a->flags & ~static_cast<uint32_t>(AMDGPU_GEM_USERPTR_READONLY | AMDGPU_GEM_USERPTR_ANONONLY |
                                        AMDGPU_GEM_USERPTR_VALIDATE | AMDGPU_GEM_USERPTR_REGISTER))
    return -EINVAL;
  // A writable userptr needs an MMU notifier (REGISTER).
  if (!(a->flags & AMDGPU_GEM_USERPTR_READONLY) && !(a->flags & AMDGPU_GEM_USERPTR_REGISTER))
    return -EACCES;
  if (a->size == 0 || a->addr + a->size < a->addr) return -EINVAL;
  const bool readonly = a->flags & AMDGPU_GEM_USERPTR_READONLY;
  const bool anon_only = a->flags & AMDGPU_GEM_USERPTR_ANONONLY;
  // amdgpu_gem_userptr_ioctl(): VALIDATE looks the pages up now (amdgpu_ttm_tt_get_user_pages()),
  // as every CS listing the object will.
  if (a->flags & AMDGPU_GEM_USERPTR_VALIDATE)
    if (int r = user_pages_error(a->addr, a->size, readonly, anon_only)) return r;
  BufferObject::Params p;
  p.device = f.device.index();
  p.backing = std::make_shared<UserptrBacking>(a->addr, a->size, readonly, anon_only);
  p.size = a->size;
  p.domains = AMDGPU_GEM_DOMAIN_GTT;
  p.userptr = true;
  auto bo = std::make_shared<BufferObject>(std::move(p));
  std::lock_guard lk(Emulator::get().mutex());
  a->handle = f.handle_for(std::move(bo));
  return 0;
}

int amdgpu_ioctl_gem_wait_idle(DeviceFile &f, void *data) {
  auto *a = static_cast<drm_amdgpu_gem_wait_idle *>(data);
  std::shared_ptr<BufferObject> bo;
  {
    std::lock_guard lk(Emulator::get().mutex());
    bo = f.bo(a->in.handle);
  }
  if (!bo) return -ENOENT;
  const Deadline deadline = deadline_from_amdgpu_timeout(a->in.timeout);
  std::unique_lock lk(FenceDomain::mutex());
  const bool idle = FenceDomain::wait_until(
      lk, deadline,
      [&] {
        for (const auto &r : bo->fences)
          if (!r.fence->is_signaled_locked()) return false;
        return true;
      },
      [&](Waiter &w) {
        for (const auto &r : bo->fences)
          Fence::subscribe_locked(w, r.fence);
      });
  std::erase_if(bo->fences, [](const ResvFence &r) { return r.fence->is_signaled_locked(); });
  lk.unlock();
  std::memset(a, 0, sizeof(*a));
  a->out.status = idle ? 0 : 1;
  a->out.domain = static_cast<uint32_t>(bo->current_domain());
  return 0;
}

int amdgpu_ioctl_gem_op(DeviceFile &f, void *data) {
  auto *a = static_cast<drm_amdgpu_gem_op *>(data);
  std::lock_guard lk(Emulator::get().mutex());
  auto bo = f.bo(a->handle);
  if (!bo) return -ENOENT;
  switch (a->op) {
    case AMDGPU_GEM_OP_GET_GEM_CREATE_INFO: {
      drm_amdgpu_gem_create_in info{bo->size(), bo->alignment(), bo->preferred_domains(),
                                    bo->domain_flags()};
      return copy_to_user(a->value, &info, sizeof(info));
    }
    case AMDGPU_GEM_OP_SET_PLACEMENT:
      if (bo->userptr()) return -EPERM;
      bo->set_preferred_domains(
          a->value & (AMDGPU_GEM_DOMAIN_VRAM | AMDGPU_GEM_DOMAIN_GTT | AMDGPU_GEM_DOMAIN_CPU));
      return 0;
    default:
      return -EINVAL;
  }
}

int amdgpu_ioctl_gem_metadata(DeviceFile &f, void *data) {
  auto *a = static_cast<drm_amdgpu_gem_metadata *>(data);
  std::lock_guard lk(Emulator::get().mutex());
  auto bo = f.bo(a->handle);
  if (!bo) return -ENOENT;
  BoMetadata &m = bo->metadata;
  if (a->op == AMDGPU_GEM_METADATA_OP_SET_METADATA) {
    if (a->data.data_size_bytes > sizeof(a->data.data)) return -EINVAL;
    m.flags = a->data.flags;
    m.tiling_info = a->data.tiling_info;
    m.size = a->data.data_size_bytes;
    std::memcpy(m.data, a->data.data, m.size);
    return 0;
  }
  if (a->op == AMDGPU_GEM_METADATA_OP_GET_METADATA) {
    a->data.flags = m.flags;
    a->data.tiling_info = m.tiling_info;
    a->data.data_size_bytes = m.size;
    std::memcpy(a->data.data, m.data, m.size);
    return 0;
  }
  return -EINVAL;
}

// Reads a BO list the way amdgpu_bo_create_list_entry_array() does (stride bo_info_size) and
// resolves its handles (-ENOENT for an unknown one). State lock held.
int read_bo_list(DeviceFile &f, uint64_t ptr, uint32_t count, uint32_t stride,
                 std::vector<std::shared_ptr<BufferObject>> &out) {
  // amdgpu_bo_create_list_entry_array(): AMDGPU_BO_LIST_MAX_ENTRIES, before anything is copied
  // ("drm/amdgpu: Limit BO list entry count to prevent resource exhaustion", 688b87d39e0a, 2026,
  // in stable kernels; earlier kernels only checked the array size for overflow).
  constexpr uint32_t kMaxEntries = 128 * 1024;
  if (count > kMaxEntries) return -EINVAL;
  out.clear();
  const uint32_t take = std::min<uint32_t>(stride, sizeof(drm_amdgpu_bo_list_entry));
  for (uint32_t i = 0; i < count; ++i) {
    drm_amdgpu_bo_list_entry e{};
    if (copy_from_user(&e, ptr + uint64_t{i} * stride, take)) return -EFAULT;
    auto bo = f.bo(e.bo_handle);
    if (!bo) return -ENOENT;
    out.push_back(std::move(bo));
  }
  return 0;
}

int amdgpu_ioctl_bo_list(DeviceFile &f, void *data) {
  auto *a = static_cast<drm_amdgpu_bo_list *>(data);
  const auto in = a->in;
  std::lock_guard lk(Emulator::get().mutex());
  switch (in.operation) {
    case AMDGPU_BO_LIST_OP_CREATE: {
      std::vector<std::shared_ptr<BufferObject>> list;
      if (int r = read_bo_list(f, in.bo_info_ptr, in.bo_number, in.bo_info_size, list)) return r;
      std::memset(a, 0, sizeof(*a));
      a->out.list_handle =
          f.bo_lists.insert(std::make_shared<const BoList::element_type>(std::move(list)));
      return 0;
    }
    case AMDGPU_BO_LIST_OP_DESTROY:
      f.bo_lists.erase(in.list_handle);
      std::memset(a, 0, sizeof(*a));
      return 0;
    case AMDGPU_BO_LIST_OP_UPDATE: {
      // amdgpu_bo_list_ioctl(): the new list is built first, then idr_replace() finds the handle.
      std::vector<std::shared_ptr<BufferObject>> next;
      if (int r = read_bo_list(f, in.bo_info_ptr, in.bo_number, in.bo_info_size, next)) return r;
      auto *list = f.bo_lists.find(in.list_handle);
      if (!list) return -ENOENT;
      *list = std::make_shared<const BoList::element_type>(std::move(next));
      std::memset(a, 0, sizeof(*a));
      a->out.list_handle = in.list_handle;
      return 0;
    }
    default:
      return -EINVAL;
  }
}

}  // namespace rvgl::emu
