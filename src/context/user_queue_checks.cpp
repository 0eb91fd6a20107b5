#include "context/user_queue_checks.h"

#include <algorithm>
#include <cerrno>

#include "util/checked_math.h"

namespace rvgl {

namespace {

// The range lies inside one mapping (amdgpu_userq_input_va_validate(): one bo_va mapping holds
// [addr, addr + size - 1]); with `writable`, the engine writes it, so the mapping must allow that.
int in_one_mapping(const VaSpace &va, uint64_t addr, uint64_t size, bool writable,
                   const VaMapping **out = nullptr) {
  const VaMapping *m = va.find(addr, size);
  if (!m) return -EINVAL;
  if (writable && (!(m->flags & RVGL_VA_FLAG_WRITE) || (m->object && m->object->gpu_read_only())))
    return -EACCES;
  if (out) *out = m;
  return 0;
}

bool aligned_to(uint64_t v, uint32_t alignment) {
  return alignment <= 1 || (is_pow2(alignment) && is_aligned(v, alignment));
}

}  // namespace

int check_user_queue(const UserQueueChecks &c, const rvgl_req_queue_create &q,
                     std::shared_ptr<MemoryObject> *doorbell) {
  const bool sdma = q.ip == RVGL_IP_SDMA;
  // amdgpu_userq_input_args_validate(): a power of two of at least one GPU page. The ring base
  // registers (CP_HQD_PQ_BASE, SDMA RB_BASE) hold the address >> 8.
  // The kernel checks no upper bound, and keeps the size in a u32 (struct amdgpu_mqd_prop's
  // queue_size, mes_userq_mqd_create()): 4 GiB would become a ring of size 0.
  if (!is_pow2(q.queue_size) || q.queue_size < RVGL_USERQ_MIN_RING_SIZE ||
      q.queue_size > RVGL_USERQ_MAX_RING_SIZE || !is_aligned(q.queue_va, RVGL_USERQ_RING_ALIGNMENT))
    return -EINVAL;
  if (!is_aligned(q.rptr_va, 8) || !is_aligned(q.wptr_va, 8) || q.eop_va == 0) return -EINVAL;
  // The EOP buffer (compute) or context save area (SDMA): mes_userq_mqd_create() validates the
  // size AMDGPU_INFO_UQ_FW_AREAS reports; the capset carries it.
  const uint32_t area_size = sdma ? c.capset.userq_sdma_csa_size : c.capset.userq_eop_size;
  const uint32_t area_align =
      sdma ? c.capset.userq_sdma_csa_alignment : c.capset.userq_eop_alignment;
  if (!aligned_to(q.eop_va, area_align)) return -EINVAL;

  // Ring: the engine only reads it. rptr: the engine writes its read position there. wptr: the
  // firmware reads it (MES maps the object into GART, mes_userq_create_wptr_mapping(), which
  // refuses an object of more than one page). amdgpu_userq_create() validates one GPU page from
  // each pointer.
  const VaMapping *wptr_map = nullptr;
  if (int r = in_one_mapping(c.va, q.queue_va, q.queue_size, false)) return r;
  if (int r = in_one_mapping(c.va, q.rptr_va, RVGL_USERQ_PTR_SPAN, true)) return r;
  if (int r = in_one_mapping(c.va, q.wptr_va, RVGL_USERQ_PTR_SPAN, false, &wptr_map)) return r;
  if (!wptr_map->object || wptr_map->object->size() > RVGL_USERQ_WPTR_OBJECT_MAX) return -EINVAL;
  // The queue holds the wptr object bound into GART, with a reference of its own, for its whole
  // life (mes_userq_map_gtt_bo_to_gart(): amdgpu_ttm_alloc_gart() and amdgpu_bo_ref()): nothing a
  // detach or unref does reaches that binding, so the firmware would go on reading guest pages
  // the VMM took back. Guest memory is never the wptr, nor a DOORBELL object, which the kernel
  // would try to move into GTT for it.
  if (wptr_map->object->kind() == MemoryObject::Kind::kUserptr ||
      wptr_map->object->domain() == RVGL_DOMAIN_DOORBELL)
    return -EINVAL;
  if (int r = in_one_mapping(c.va, q.eop_va, std::max<uint32_t>(area_size, 4), true)) return r;

  // amdgpu_userq_get_doorbell_index(): a DOORBELL object, 8-byte doorbells inside it.
  std::shared_ptr<MemoryObject> db = c.bos.get_shared(q.doorbell_bo);
  if (!db) return -ENOENT;
  if (db->domain() != RVGL_DOMAIN_DOORBELL) return -EINVAL;
  if ((uint64_t{q.doorbell_offset} + 1) * RVGL_USERQ_DOORBELL_SIZE > db->size()) return -EINVAL;
  // The kernel keys queues by absolute doorbell (xa_insert into userq_doorbell_xa: -EBUSY).
  if (c.doorbell_in_use && c.doorbell_in_use(db.get(), q.doorbell_offset)) return -EBUSY;
  *doorbell = std::move(db);
  return 0;
}

}  // namespace rvgl
