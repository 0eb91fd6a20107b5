#include "memory/gpu_vm.h"

#include <amdgpu_drm.h>

#include <algorithm>
#include <array>
#include <cerrno>

#include "core/counters.h"
#include "core/runtime_knobs.h"
#include "memory/va_layout.h"
#include "sync/fence.h"
#include "util/clock.h"

namespace rvgl::emu {

namespace {

uint64_t canon(uint64_t va) {
  return va & va::kHoleMask;
}

int64_t now_ns() {
  return static_cast<int64_t>(monotonic_ns());
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

GpuVm::~GpuVm() {
  // The file is closing: its updates are done with (nothing reads this VM any more).
  for (Freed &f : freed_)
    if (f.done) f.done->signal();
}

void GpuVm::retire_locked(uint64_t va, const Mapping &m) {
  // Every ticket in flight was handed out before this removal, and every engine access in
  // progress began before it. The update itself takes RVGL_EMU_VM_UPDATE_US, which only an engine
  // reading the page tables can tell (a job's CS waits for it).
  const int64_t delay =
      engines_ ? static_cast<int64_t>(knobs().vm_update_us.load()) * 1000 : int64_t{0};
  if (in_flight_.empty() && reading_.empty() && delay == 0) return;
  freed_.push_back(Freed{va, m, jobs_, now_ns() + delay, Fence::create()});
}

bool GpuVm::done_locked(const Freed &f, int64_t now_ns) const {
  uint64_t oldest = in_flight_.empty() ? kNoVmTicket : *in_flight_.begin();
  if (!reading_.empty()) oldest = std::min(oldest, *reading_.begin());
  return oldest > std::max(f.last_job, f.read_by) && now_ns >= f.not_before_ns;
}

void GpuVm::complete_due() {
  // A few at a time on the stack: this runs where nothing may allocate (a job's end, an engine
  // access's), and the fences signal without the lock.
  for (;;) {
    std::array<std::shared_ptr<Fence>, 8> batch;
    size_t n = 0;
    {
      std::lock_guard lk(mu_);
      const int64_t now = now_ns();
      while (n < batch.size() && !freed_.empty() && done_locked(freed_.front(), now)) {
        batch[n++] = std::move(freed_.front().done);
        freed_.erase(freed_.begin());
      }
    }
    for (size_t i = 0; i < n; ++i)
      if (batch[i]) batch[i]->signal();
    if (n < batch.size()) return;
  }
}

uint64_t GpuVm::begin_job() {
  std::lock_guard lk(mu_);
  in_flight_.insert(++jobs_);
  return jobs_;
}

void GpuVm::end_job(uint64_t seq) {
  {
    std::lock_guard lk(mu_);
    in_flight_.erase(seq);
  }
  complete_due();
}

uint64_t GpuVm::begin_access() {
  std::lock_guard lk(mu_);
  reading_.insert(++jobs_);
  return jobs_;
}

void GpuVm::end_access(uint64_t seq) {
  {
    std::lock_guard lk(mu_);
    reading_.erase(seq);
  }
  complete_due();
}

void GpuVm::engine_attached() {
  std::lock_guard lk(mu_);
  ++engines_;
}

void GpuVm::engine_gone() {
  {
    std::lock_guard lk(mu_);
    // With no engine left nothing can tell the delay: it is over.
    if (--engines_ == 0)
      for (Freed &f : freed_)
        f.not_before_ns = 0;
  }
  complete_due();
}

void GpuVm::after_fork_child() {
  {
    std::lock_guard lk(mu_);
    engines_ = 0;
    reading_.clear();
    for (Freed &f : freed_)
      f.not_before_ns = 0;
  }
  complete_due();
}

std::shared_ptr<Fence> GpuVm::update_fence() const {
  std::lock_guard lk(mu_);
  return freed_.empty() ? nullptr : freed_.back().done;
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

const GpuVm::Mapping *GpuVm::find_locked(uint64_t va, uint64_t ticket, int64_t now_ns,
                                         uint64_t *start) const {
  // A job older than a removal sees the mapping as it was: of the removals after it that cover
  // `va`, the first (the mapping live when the job was submitted). The page tables show the
  // first removal whose update has not run.
  const Freed *seen = nullptr;
  for (const Freed &f : freed_) {
    const bool sees = ticket == kPageTableView ? !done_locked(f, now_ns) : ticket <= f.last_job;
    if (sees && va >= f.va && va - f.va < f.m.size && (!seen || f.last_job < seen->last_job))
      seen = &f;
  }
  // An engine access translating through a removal holds it until the access is done (every
  // access begun so far: this one among them).
  if (seen && ticket == kPageTableView) seen->read_by = std::max(seen->read_by, jobs_);
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
  // Only the page tables' view asks whether an update has run yet.
  const int64_t now = ticket == kPageTableView ? now_ns() : 0;
  std::lock_guard lk(mu_);
  uint64_t at = va;
  const uint64_t end = va + len;
  while (at < end) {
    uint64_t start = 0;
    const Mapping *found = find_locked(at, ticket, now, &start);
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
  {
    std::lock_guard lk(mu_);
    fault_ = f;
  }
  counters().vm_faults.fetch_add(1, std::memory_order_relaxed);
}

VmFault GpuVm::last_fault() const {
  std::lock_guard lk(mu_);
  return fault_;
}

}  // namespace rvgl::emu
