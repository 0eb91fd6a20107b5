#include "memory/gpu_vm.h"

#include <amdgpu_drm.h>

#include <algorithm>
#include <cerrno>

#include "memory/va_layout.h"

namespace rvgl::emu {

namespace {

uint64_t canon(uint64_t va) {
  return va & va::kHoleMask;
}

uint32_t required_flag(VmAccess a) {
  switch (a) {
    case VmAccess::Read:
      return AMDGPU_VM_PAGE_READABLE;
    case VmAccess::Write:
      return AMDGPU_VM_PAGE_WRITEABLE;
    case VmAccess::Execute:
      return AMDGPU_VM_PAGE_EXECUTABLE;
  }
  return AMDGPU_VM_PAGE_READABLE;
}

uint32_t permission_bit(VmAccess a) {
  switch (a) {
    case VmAccess::Read:
      return fault_status::kPermRead;
    case VmAccess::Write:
      return fault_status::kPermWrite;
    case VmAccess::Execute:
      return fault_status::kPermExecute;
  }
  return fault_status::kPermRead;
}

VmFault make_fault(uint64_t addr, VmAccess a, bool mapping_error) {
  VmFault f;
  f.addr = addr & ~(va::kGpuPageSize - 1);
  f.status = (1u << fault_status::kVmidShift);
  if (mapping_error)
    f.status |= fault_status::kMappingError;
  else
    f.status |= permission_bit(a) << fault_status::kPermissionShift;
  if (a == VmAccess::Write) f.status |= fault_status::kRwWrite;
  f.vmhub = 0;  // AMDGPU_VMHUB_TYPE_GFX, instance 0
  return f;
}

}  // namespace

int GpuVm::insert_locked(std::shared_ptr<BufferObject> bo, uint64_t va, uint64_t offset,
                         uint64_t size, uint32_t flags) {
  va = canon(va);
  // amdgpu_vm_bo_map(): an overlap with any existing mapping is refused.
  auto it = maps_.upper_bound(va);
  if (it != maps_.begin()) {
    auto prev = std::prev(it);
    if (prev->first + prev->second.size > va) return -EINVAL;
  }
  if (it != maps_.end() && it->first < va + size) return -EINVAL;
  maps_.emplace(va, Mapping{size, std::move(bo), offset, flags});
  return 0;
}

int GpuVm::map(std::shared_ptr<BufferObject> bo, uint64_t va, uint64_t offset, uint64_t size,
               uint32_t flags) {
  std::lock_guard lk(mu_);
  return insert_locked(std::move(bo), va, offset, size, flags);
}

int GpuVm::unmap(const BufferObject *bo, uint64_t va) {
  std::lock_guard lk(mu_);
  auto it = maps_.find(canon(va));
  if (it == maps_.end() || it->second.bo.get() != bo) return -ENOENT;
  retire_locked(it->first, it->second);
  maps_.erase(it);
  return 0;
}

void GpuVm::retire_locked(uint64_t va, const Mapping &m) {
  // Every ticket in flight was handed out before this removal.
  if (!in_flight_.empty()) freed_.push_back(Freed{va, m, jobs_});
}

uint64_t GpuVm::begin_job() {
  std::lock_guard lk(mu_);
  in_flight_.insert(++jobs_);
  return jobs_;
}

void GpuVm::end_job(uint64_t seq) {
  std::lock_guard lk(mu_);
  in_flight_.erase(seq);
  // A removal is done once no job submitted before it is left.
  const uint64_t oldest = in_flight_.empty() ? kNoVmTicket : *in_flight_.begin();
  std::erase_if(freed_, [oldest](const Freed &f) { return f.last_job < oldest; });
}

void GpuVm::clear_locked(uint64_t va, uint64_t size) {
  va = canon(va);
  const uint64_t end = va + size;
  auto it = maps_.upper_bound(va);
  if (it != maps_.begin()) --it;
  while (it != maps_.end() && it->first < end) {
    const uint64_t s = it->first, e = s + it->second.size;
    if (e <= va) {
      ++it;
      continue;
    }
    Mapping m = it->second;
    const uint64_t cut = std::max(s, va);
    retire_locked(cut, Mapping{std::min(e, end) - cut, m.bo, m.offset + (cut - s), m.flags});
    it = maps_.erase(it);
    // Keep what lies outside [va, end) (amdgpu_vm_bo_clear_mappings splits mappings).
    if (s < va) maps_.emplace(s, Mapping{va - s, m.bo, m.offset, m.flags});
    if (e > end) {
      it = maps_.emplace(end, Mapping{e - end, m.bo, m.offset + (end - s), m.flags}).first;
      ++it;
    }
  }
}

void GpuVm::clear(uint64_t va, uint64_t size) {
  std::lock_guard lk(mu_);
  clear_locked(va, size);
}

int GpuVm::replace(std::shared_ptr<BufferObject> bo, uint64_t va, uint64_t offset, uint64_t size,
                   uint32_t flags) {
  std::lock_guard lk(mu_);
  clear_locked(va, size);
  return insert_locked(std::move(bo), va, offset, size, flags);
}

void GpuVm::remove_bo(const BufferObject *bo) {
  std::lock_guard lk(mu_);
  for (auto it = maps_.begin(); it != maps_.end();) {
    if (it->second.bo.get() != bo) {
      ++it;
      continue;
    }
    retire_locked(it->first, it->second);
    it = maps_.erase(it);
  }
}

size_t GpuVm::mapping_count() const {
  std::lock_guard lk(mu_);
  return maps_.size();
}

bool GpuVm::covered_by_one_mapping(uint64_t va, uint64_t size) const {
  std::lock_guard lk(mu_);
  va = canon(va);
  auto it = maps_.upper_bound(va);
  if (it == maps_.begin()) return false;
  --it;
  return va >= it->first && va - it->first < it->second.size &&
         it->second.size - (va - it->first) >= size;
}

std::shared_ptr<BufferObject> GpuVm::bo_at(uint64_t va) const {
  std::lock_guard lk(mu_);
  va = canon(va);
  auto it = maps_.upper_bound(va);
  if (it == maps_.begin()) return nullptr;
  --it;
  return va - it->first < it->second.size ? it->second.bo : nullptr;
}

const GpuVm::Mapping *GpuVm::find_locked(uint64_t va, uint64_t ticket, uint64_t *start) const {
  // A job older than a removal sees the mapping as it was: of the removals after it that cover
  // `va`, the first (the mapping live when the job was submitted).
  const Freed *seen = nullptr;
  for (const Freed &f : freed_)
    if (ticket <= f.last_job && va >= f.va && va - f.va < f.m.size &&
        (!seen || f.last_job < seen->last_job))
      seen = &f;
  if (seen) {
    *start = seen->va;
    return &seen->m;
  }
  auto it = maps_.upper_bound(va);
  if (it == maps_.begin()) return nullptr;
  --it;
  if (va - it->first >= it->second.size) return nullptr;
  *start = it->first;
  return &it->second;
}

bool GpuVm::resolve(uint64_t va, uint64_t len, VmAccess access, std::vector<VmPiece> &out,
                    VmFault &fault, uint64_t injected_va, uint64_t injected_len,
                    uint64_t ticket) const {
  out.clear();
  if (len == 0) return true;
  va = canon(va);
  if (va + len < va || va + len > va::kVmSize) {
    fault = make_fault(va::kVmSize - 1 < va ? va : va::kVmSize - 1, access, true);
    return false;
  }
  if (injected_len) {
    const uint64_t iva = canon(injected_va);
    if (va < iva + injected_len && iva < va + len) {
      fault = make_fault(std::max(va, iva), access, true);
      return false;
    }
  }
  const uint32_t need = required_flag(access);
  std::lock_guard lk(mu_);
  uint64_t at = va;
  const uint64_t end = va + len;
  while (at < end) {
    uint64_t start = 0;
    const Mapping *found = find_locked(at, ticket, &start);
    if (!found) {
      fault = make_fault(at, access, true);
      return false;
    }
    const Mapping &m = *found;
    const bool prt = (m.flags & AMDGPU_VM_PAGE_PRT) != 0;
    // A read-only userptr has no writeable PTE whatever GEM_VA asked for (amdgpu_ttm_tt_pte_flags).
    const bool readonly_pages = m.bo && m.bo->backing()->gpu_readonly();
    if (!prt && (!(m.flags & need) || (access == VmAccess::Write && readonly_pages))) {
      fault = make_fault(at, access, false);
      return false;
    }
    const uint64_t piece = std::min(end, start + m.size) - at;
    out.push_back(VmPiece{prt ? nullptr : m.bo->backing(), m.offset + (at - start), piece});
    at += piece;
  }
  return true;
}

void GpuVm::record_fault(const VmFault &f) {
  std::lock_guard lk(mu_);
  fault_ = f;
}

VmFault GpuVm::last_fault() const {
  std::lock_guard lk(mu_);
  return fault_;
}

}  // namespace rvgl::emu
