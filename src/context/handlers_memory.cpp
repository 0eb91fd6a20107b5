// BO_CREATE, BO_FREE, VA_MAP, VA_UNMAP.
#include <cerrno>

#include "context/compute_context.h"
#include "util/checked_math.h"

namespace rvgl {

namespace {

constexpr uint64_t kPage = 4096;
constexpr uint64_t kMaxAlignment = 2ull << 20;

Usage::Pool pool_of(uint32_t domain) {
  switch (domain) {
    case RVGL_DOMAIN_VRAM:
      return Usage::Pool::kVram;
    case RVGL_DOMAIN_GTT:
      return Usage::Pool::kGtt;
    default:
      return Usage::Pool::kOther;
  }
}

uint64_t kernel_domain(uint32_t domain) {
  switch (domain) {
    case RVGL_DOMAIN_VRAM:
      return AMDGPU_GEM_DOMAIN_VRAM;
    case RVGL_DOMAIN_GTT:
      return AMDGPU_GEM_DOMAIN_GTT;
    default:
      return RVGL_AMDGPU_GEM_DOMAIN_DOORBELL;
  }
}

uint64_t kernel_create_flags(uint32_t domain, uint32_t flags) {
  // Always cleared and wiped: a guest must never see another tenant's data.
  uint64_t f = AMDGPU_GEM_CREATE_VRAM_CLEARED | AMDGPU_GEM_CREATE_VRAM_WIPE_ON_RELEASE;
  if (domain == RVGL_DOMAIN_DOORBELL) return 0;
  if (flags & RVGL_BO_FLAG_CPU_ACCESS) f |= AMDGPU_GEM_CREATE_CPU_ACCESS_REQUIRED;
  if (flags & RVGL_BO_FLAG_NO_CPU_ACCESS) f |= AMDGPU_GEM_CREATE_NO_CPU_ACCESS;
  if (flags & RVGL_BO_FLAG_WRITE_COMBINE) f |= AMDGPU_GEM_CREATE_CPU_GTT_USWC;
  return f;
}

uint32_t kernel_va_flags(uint32_t flags) {
  uint32_t f = 0;
  if (flags & RVGL_VA_FLAG_READ) f |= AMDGPU_VM_PAGE_READABLE;
  if (flags & RVGL_VA_FLAG_WRITE) f |= AMDGPU_VM_PAGE_WRITEABLE;
  if (flags & RVGL_VA_FLAG_EXECUTE) f |= AMDGPU_VM_PAGE_EXECUTABLE;
  return f;
}

}  // namespace

int32_t ComputeContext::cmd_bo_create(const Request &req, Response &rsp) {
  const auto &q = req.as<rvgl_req_bo_create>();
  if (q.size == 0 || !is_aligned(q.size, kPage)) return -EINVAL;
  if (q.alignment && (!is_pow2(q.alignment) || q.alignment > kMaxAlignment)) return -EINVAL;
  if (q.domain != RVGL_DOMAIN_VRAM && q.domain != RVGL_DOMAIN_GTT &&
      q.domain != RVGL_DOMAIN_DOORBELL)
    return -EINVAL;
  if (q.flags & ~RVGL_BO_FLAGS_ALL) return -EINVAL;
  if ((q.flags & RVGL_BO_FLAG_CPU_ACCESS) && (q.flags & RVGL_BO_FLAG_NO_CPU_ACCESS)) return -EINVAL;
  if ((q.flags & RVGL_BO_FLAG_WRITE_COMBINE) && q.domain != RVGL_DOMAIN_GTT) return -EINVAL;
  if (q.domain == RVGL_DOMAIN_DOORBELL && !(facts_.capset.features & RVGL_FEATURE_USER_QUEUES))
    return -ENODEV;
  if (q.blob_id && used_blob_ids_.count(q.blob_id)) return -EEXIST;

  if (int err = usage_->charge(pool_of(q.domain), q.size)) return err;
  Charge charge(usage_, pool_of(q.domain), q.size);
  uint32_t handle;
  const uint64_t align = q.alignment ? q.alignment : kPage;
  if (int err = dev_->gem_create(q.size, align, kernel_domain(q.domain),
                                 kernel_create_flags(q.domain, q.flags), &handle))
    return err;
  auto obj =
      std::make_shared<MemoryObject>(dev_, MemoryObject::Kind::kBo, q.domain,
                                     std::vector<MemoryObject::Segment>{{handle, q.size}}, false);
  obj->set_charge(std::move(charge));
  obj->set_bo_flags(q.flags);
  const uint32_t bo = bos_.insert(obj);
  if (!bo) return -ENOSPC;
  if (q.blob_id) {
    used_blob_ids_.insert(q.blob_id);
    parked_blobs_[q.blob_id] = obj;
  }
  rsp.as<rvgl_rsp_bo_create>().bo = bo;
  return 0;
}

int32_t ComputeContext::cmd_bo_free(const Request &req, Response &) {
  const auto &q = req.as<rvgl_req_bo_free>();
  std::shared_ptr<MemoryObject> obj = bos_.remove(q.bo);
  if (!obj) return -ENOENT;
  unmap_object(obj.get());
  for (auto it = parked_blobs_.begin(); it != parked_blobs_.end(); ++it) {
    if (it->second == obj) {
      parked_blobs_.erase(it);
      break;
    }
  }
  return 0;
}

int32_t ComputeContext::cmd_va_map(const Request &req, Response &) {
  const auto &q = req.as<rvgl_req_va_map>();
  if ((q.flags & ~RVGL_VA_FLAGS_ALL) || !(q.flags & RVGL_VA_FLAG_READ)) return -EINVAL;
  std::shared_ptr<MemoryObject> obj;
  if (int err = lookup_object(q.bo, q.res_id, &obj)) return err;
  if (!is_aligned(q.offset, va_.alignment())) return -EINVAL;
  if (int err = va_.check_free(q.va, q.size)) return err;
  if (!range_within(q.offset, q.size, obj->size())) return -EINVAL;
  if ((q.flags & RVGL_VA_FLAG_WRITE) && obj->gpu_read_only()) return -EACCES;

  const uint32_t kflags = kernel_va_flags(q.flags);
  int err = 0;
  uint64_t mapped = 0;
  obj->for_each_piece(
      q.offset, q.size, [&](uint32_t handle, uint64_t off, uint64_t gpu_off, uint64_t len) {
        if (err) return;
        err = dev_->gem_va(AMDGPU_VA_OP_MAP, handle, q.va + gpu_off, off, len, kflags);
        if (err) return;
        resident_.add(handle);
        mapped = gpu_off + len;
      });
  VaMapping m{q.va, q.size, q.offset, q.flags, std::move(obj)};
  if (err) {
    // Undo the pieces that made it.
    if (mapped) unmap(VaMapping{q.va, mapped, q.offset, q.flags, m.object});
    return err;
  }
  va_.insert(std::move(m));
  return 0;
}

int32_t ComputeContext::cmd_va_unmap(const Request &req, Response &) {
  const auto &q = req.as<rvgl_req_va_unmap>();
  if (q.size == 0 || !is_aligned(q.va, va_.alignment()) || !is_aligned(q.size, va_.alignment()))
    return -EINVAL;
  auto m = va_.take(q.va, q.size);
  if (!m) return -ENOENT;
  unmap(*m);
  return 0;
}

}  // namespace rvgl
