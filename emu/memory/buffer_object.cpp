#include "memory/buffer_object.h"

#include <amdgpu_drm.h>

#include <atomic>

#include "amdgpu/uapi/amdgpu_drm_ext.h"
#include "core/counters.h"
#include "sync/fence.h"

namespace rvgl::emu {

namespace {
std::atomic<uint64_t> g_next_bo_id{1};
}

BufferObject::BufferObject(Params p) : p_(std::move(p)), id_(g_next_bo_id.fetch_add(1)) {
  counters().bos_alive.fetch_add(1, std::memory_order_relaxed);
  counters().bos_created.fetch_add(1, std::memory_order_relaxed);
  if (p_.userptr) counters().userptr_alive.fetch_add(1, std::memory_order_relaxed);
}

BufferObject::~BufferObject() {
  if (p_.account) p_.account->release(p_.pool, p_.size);
  counters().bos_alive.fetch_sub(1, std::memory_order_relaxed);
  if (p_.userptr) counters().userptr_alive.fetch_sub(1, std::memory_order_relaxed);
}

uint64_t BufferObject::current_domain() const {
  switch (p_.pool) {
    case MemoryAccount::Pool::Vram:
      return AMDGPU_GEM_DOMAIN_VRAM;
    case MemoryAccount::Pool::Doorbell:
      return RVGL_AMDGPU_GEM_DOMAIN_DOORBELL;
    case MemoryAccount::Pool::Gtt:
      return AMDGPU_GEM_DOMAIN_GTT;
    case MemoryAccount::Pool::None:
      break;
  }
  return p_.userptr || p_.imported ? AMDGPU_GEM_DOMAIN_GTT : AMDGPU_GEM_DOMAIN_CPU;
}

}  // namespace rvgl::emu
