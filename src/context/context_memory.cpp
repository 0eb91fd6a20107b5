#include "context/context_memory.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <new>

#include "util/checked_math.h"

namespace rvgl {

namespace {

// virglrenderer.h values, repeated so the context does not depend on virglrenderer's header.
constexpr uint32_t kFdTypeDmabuf = 1;  // VIRGL_RENDERER_BLOB_FD_TYPE_DMABUF
constexpr uint32_t kMapCached = 1;     // VIRGL_RENDERER_MAP_CACHE_CACHED
constexpr uint32_t kMapUncached = 2;   // VIRGL_RENDERER_MAP_CACHE_UNCACHED
constexpr uint32_t kMapWc = 3;         // VIRGL_RENDERER_MAP_CACHE_WC

constexpr uint64_t kPage = 4096;
constexpr uint64_t kMaxAlignment = 2ull << 20;

Usage::Pool pool_of(uint32_t domain) {
  switch (domain) {
    case RVGL_DOMAIN_VRAM:
      return Usage::Pool::kVram;
    case RVGL_DOMAIN_GTT:
      return Usage::Pool::kGtt;
    default:
      return Usage::Pool::kDoorbell;
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
  // Always cleared and wiped: a guest must never see another tenant's data. Explicitly synced,
  // as radv's objects are (radv_amdgpu_winsys_bo_create without RADEON_FLAG_IMPLICIT_SYNC): a
  // compute guest orders its work with fences and waits, and the kernel's implicit sync would
  // make every job on an object another context also lists wait for that context's jobs
  // (amdgpu_cs_sync_rings, AMDGPU_SYNC_NE_OWNER), hanging a handshake through shared memory.
  // Our jobs' fences still go on the object for any implicitly synced reader (the display).
  uint64_t f = AMDGPU_GEM_CREATE_VRAM_CLEARED | AMDGPU_GEM_CREATE_VRAM_WIPE_ON_RELEASE |
               AMDGPU_GEM_CREATE_EXPLICIT_SYNC;
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

ContextMemory::ContextMemory(std::shared_ptr<AmdgpuDevice> dev, uint64_t features,
                             const rvgl_capset &cap, const ContextLimits &limits)
    : dev_(std::move(dev)),
      features_(features),
      limits_(limits),
      usage_(std::make_shared<Usage>(
          limits.max_objects, std::min(limits.max_vram_bytes, cap.vram_size),
          std::min(limits.max_gtt_bytes, cap.gtt_size), limits.max_userptr_bytes,
          limits.max_doorbell_bytes, limits.max_process_doorbell_bytes)),
      registry_(ObjectRegistry::create(dev_)),
      bos_(limits.max_objects),
      va_(cap.va_start, cap.va_end, cap.va_alignment),
      bo_list_(dev_) {
  if (features & RVGL_FEATURE_USER_QUEUES) vm_updates_ = std::make_unique<VmUpdateTimeline>(dev_);
}

ContextMemory::~ContextMemory() {
  // The kernel's BO list goes first, so the mappings go without an update of it each: one per
  // unmap made a context of n objects cost n lists of up to n entries to tear down.
  bo_list_.destroy();
  va_.take_all([&](const VaMapping &m) { unmap_pieces(m); });
  // The guest's pages are the VMM's again: no host use of them may outlive the context, whoever
  // still holds a reference (an SPM session finishing on the reaper).
  for (auto &[id, r] : resources_)
    if (r.kind == Resource::Kind::kUserptr) r.object->revoke();
  resources_.clear();
  parked_blobs_.clear();
  bos_.clear();
}

// ---- guest commands ----

int32_t ContextMemory::bo_create(const rvgl_req_bo_create &q, rvgl_rsp_bo_create *rsp) {
  if (q.size == 0 || !is_aligned(q.size, kPage)) return -EINVAL;
  if (q.alignment && (!is_pow2(q.alignment) || q.alignment > kMaxAlignment)) return -EINVAL;
  if (q.domain != RVGL_DOMAIN_VRAM && q.domain != RVGL_DOMAIN_GTT &&
      q.domain != RVGL_DOMAIN_DOORBELL)
    return -EINVAL;
  if (q.flags & ~RVGL_BO_FLAGS_ALL) return -EINVAL;
  if ((q.flags & RVGL_BO_FLAG_CPU_ACCESS) && (q.flags & RVGL_BO_FLAG_NO_CPU_ACCESS)) return -EINVAL;
  if ((q.flags & RVGL_BO_FLAG_WRITE_COMBINE) && q.domain != RVGL_DOMAIN_GTT) return -EINVAL;
  if (q.domain == RVGL_DOMAIN_DOORBELL && !(features_ & RVGL_FEATURE_USER_QUEUES)) return -ENODEV;
  // Ids are remembered only while their object lives, so the bookkeeping is bounded by the
  // object quota (issue 14, finding 4).
  if (q.blob_id && registry_->blob_id_in_use(q.blob_id)) return -EEXIST;

  if (int err = usage_->charge(pool_of(q.domain), q.size)) return err;
  Charge charge(usage_, pool_of(q.domain), q.size);
  uint32_t handle;
  const uint64_t align = q.alignment ? q.alignment : kPage;
  if (int err = dev_->gem_create(q.size, align, kernel_domain(q.domain),
                                 kernel_create_flags(q.domain, q.flags), &handle))
    return err;
  auto obj =
      MemoryObject::adopt_one(dev_, MemoryObject::Kind::kBo, q.domain, {handle, q.size}, false);
  obj->set_charge(std::move(charge));
  obj->set_bo_flags(q.flags);
  obj->set_blob_id(q.blob_id);
  // The blob id's place is made first: out of memory after the BO had its handle, the guest
  // would be told ENOMEM with the object kept (its quota charged) and its id taken for good.
  auto parked = parked_blobs_.end();
  if (q.blob_id) parked = parked_blobs_.try_emplace(q.blob_id).first;
  struct Unpark {
    decltype(parked_blobs_) &blobs;
    decltype(parked) &it;
    ~Unpark() {
      if (it != blobs.end()) blobs.erase(it);
    }
  } unpark{parked_blobs_, parked};
  registry_->add(obj);
  const uint32_t bo = bos_.insert(obj);
  if (!bo) return -ENOSPC;
  if (q.blob_id) {
    parked->second = obj;
    parked = parked_blobs_.end();  // kept
  }
  rsp->bo = bo;
  return 0;
}

int32_t ContextMemory::bo_free(const rvgl_req_bo_free &q) {
  std::shared_ptr<MemoryObject> obj = bos_.remove(q.bo);
  if (!obj) return -ENOENT;
  unmap_object(obj.get());
  if (obj->blob_id()) {
    auto it = parked_blobs_.find(obj->blob_id());
    if (it != parked_blobs_.end() && it->second == obj) parked_blobs_.erase(it);
  }
  return 0;
}

int32_t ContextMemory::va_map(const rvgl_req_va_map &q) {
  if ((q.flags & ~RVGL_VA_FLAGS_ALL) || !(q.flags & RVGL_VA_FLAG_READ)) return -EINVAL;
  std::shared_ptr<MemoryObject> obj;
  if (int err = lookup_object(q.bo, q.res_id, &obj)) return err;
  if (!is_aligned(q.offset, va_.alignment())) return -EINVAL;
  if (int err = va_.check_free(q.va, q.size)) return err;
  if (!range_within(q.offset, q.size, obj->size())) return -EINVAL;
  if ((q.flags & RVGL_VA_FLAG_WRITE) && obj->gpu_read_only()) return -EACCES;
  // What the kernel will hold: a mapping per piece (a scattered userptr blob has thousands) and
  // page tables for every byte, however often the same object is mapped.
  uint64_t pieces = 0;
  obj->for_each_piece(q.offset, q.size, [&](uint32_t, uint64_t, uint64_t, uint64_t) { ++pieces; });
  if (pieces > limits_.max_va_mappings - kernel_mappings_) return -ENOSPC;
  if (q.size > limits_.max_va_bytes - mapped_bytes_) return -ENOSPC;

  const uint32_t kflags = kernel_va_flags(q.flags);
  // Reachable from the first kernel mapping on, whatever comes of this request: a piece mapped
  // and undone below keeps its page-table entries until the VM's jobs in flight end
  // (amdgpu_vm_clear_freed() syncs to them), so detach, unref and destroy must wait for those.
  obj->note_gpu_mapped();
  int err = 0;
  uint64_t mapped = 0;
  try {
    obj->for_each_piece(
        q.offset, q.size, [&](uint32_t handle, uint64_t off, uint64_t gpu_off, uint64_t len) {
          if (err) return;
          // Counted resident before the kernel maps it: out of memory there, nothing of this
          // piece exists, and the pieces before it are undone below.
          resident_.add(handle);
          err = dev_->gem_va(AMDGPU_VA_OP_MAP, handle, q.va + gpu_off, off, len, kflags);
          if (err) {
            resident_.remove(handle);
            return;
          }
          mapped = gpu_off + len;
        });
  } catch (const std::bad_alloc &) {
    err = -ENOMEM;
  }
  VaMapping m{q.va, q.size, q.offset, q.flags, std::move(obj), pieces};
  if (err) {
    // Undo the pieces that made it.
    if (mapped) unmap(VaMapping{q.va, mapped, q.offset, q.flags, m.object});
    return err;
  }
  // Recorded, or undone: a kernel mapping nobody knows of would outlive the object's revoke.
  try {
    va_.insert(std::move(m));
  } catch (const std::bad_alloc &) {
    unmap(m);
    return -ENOMEM;
  }
  kernel_mappings_ += pieces;
  mapped_bytes_ += q.size;
  return 0;
}

void ContextMemory::forget(const VaMapping &m) {
  kernel_mappings_ -= m.pieces;
  mapped_bytes_ -= m.size;
}

int32_t ContextMemory::va_unmap(const rvgl_req_va_unmap &q) {
  if (q.size == 0 || !is_aligned(q.va, va_.alignment()) || !is_aligned(q.size, va_.alignment()))
    return -EINVAL;
  auto m = va_.take(q.va, q.size);
  if (!m) return -ENOENT;
  forget(*m);
  unmap(*m);
  return 0;
}

// ---- the VMM's resources ----

int ContextMemory::create_blob(const BlobArgs &args, BlobExport *out) {
  if (!free_res_id(args.res_id)) return -EINVAL;
  const bool userptr = args.blob_flags & (RVGL_BLOB_FLAG_USERPTR | RVGL_BLOB_FLAG_USERPTR_RDONLY);
  if (userptr &&
      (args.blob_mem == RVGL_BLOB_MEM_GUEST || args.blob_mem == RVGL_BLOB_MEM_HOST3D_GUEST))
    return create_userptr(args, out);
  if (args.blob_mem != RVGL_BLOB_MEM_HOST3D || userptr) return -EINVAL;
  return claim_bo(args, out);
}

int ContextMemory::add_shared_page(uint32_t res_id) {
  if (!free_res_id(res_id)) return -EINVAL;
  resources_[res_id] = Resource{Resource::Kind::kSharedPage, nullptr};
  return 0;
}

bool ContextMemory::is_shared_page(uint32_t res_id) const {
  auto it = resources_.find(res_id);
  return it != resources_.end() && it->second.kind == Resource::Kind::kSharedPage;
}

int ContextMemory::claim_bo(const BlobArgs &args, BlobExport *out) {
  auto it = parked_blobs_.find(args.blob_id);
  if (it == parked_blobs_.end()) return -ENOENT;
  const std::shared_ptr<MemoryObject> obj = it->second;
  if (args.size != obj->size()) return -EINVAL;
  // The kernel refuses to map an object created NO_CPU_ACCESS whatever its domain
  // (amdgpu_gem_object_mmap(): -EPERM), so such a blob could never be mapped by the VMM.
  const bool cpu_mappable =
      !(obj->bo_flags() & RVGL_BO_FLAG_NO_CPU_ACCESS) &&
      (obj->domain() != RVGL_DOMAIN_VRAM || (obj->bo_flags() & RVGL_BO_FLAG_CPU_ACCESS));
  if ((args.blob_flags & RVGL_BLOB_FLAG_USE_MAPPABLE) && !cpu_mappable) return -EINVAL;
  if (int err = export_object(*obj, out)) return err;
  // The resource's place before the blob leaves the parked list: out of memory, it stays
  // claimable.
  resources_[args.res_id] = Resource{Resource::Kind::kBo, obj};
  parked_blobs_.erase(it);
  return 0;
}

int ContextMemory::create_userptr(const BlobArgs &args, BlobExport *out) {
  if (!(features_ & RVGL_FEATURE_USERPTR)) return -ENODEV;
  uint64_t total = 0;
  for (const auto &v : args.iov) {
    if (__builtin_add_overflow(total, v.iov_len, &total)) return -EINVAL;
  }
  if (args.iov.empty() || total != args.size || args.size == 0) return -EINVAL;
  const bool ro = args.blob_flags & RVGL_BLOB_FLAG_USERPTR_RDONLY;
  // Bytes and one kernel object first; the import may not make more objects than remain, and
  // the rest is charged once it says how many it made (issue 14, finding 3).
  if (int err = usage_->charge(Usage::Pool::kUserptr, total)) return err;
  Charge charge(usage_, Usage::Pool::kUserptr, total);

  UserptrOptions opt;
  opt.max_objects =
      static_cast<uint32_t>(std::min<uint64_t>(usage_->objects_left() + 1, UINT32_MAX));
  UserptrResult res;
  if (int err = import_userptr(dev_, args.iov, ro, opt, &res)) return err;
  const uint32_t objects = res.object->kernel_objects();
  if (objects > 1) {
    if (int err = usage_->charge(Usage::Pool::kUserptr, 0, objects - 1)) return err;
    charge.add_objects(objects - 1);
  }
  res.object->set_charge(std::move(charge));
  registry_->add(res.object);
  last_userptr_strategy_ = res.strategy;
  last_userptr_objects_ = objects;
  resources_[args.res_id] = Resource{Resource::Kind::kUserptr, std::move(res.object)};
  out->fd_type = 0;
  out->size = total;
  out->map_info = kMapCached;
  return 0;
}

int ContextMemory::export_object(const MemoryObject &obj, BlobExport *out) {
  if (obj.segments().size() != 1) return -EINVAL;
  if (int err = dev_->prime_export(obj.segments()[0].handle, &out->fd)) return err;
  out->fd_type = kFdTypeDmabuf;
  out->size = obj.size();
  out->charge = obj.charge_share();
  switch (obj.domain()) {
    case RVGL_DOMAIN_VRAM:
      out->map_info = kMapWc;
      break;
    case RVGL_DOMAIN_DOORBELL:
      out->map_info = kMapUncached;
      break;
    default:
      out->map_info = (obj.bo_flags() & RVGL_BO_FLAG_WRITE_COMBINE) ? kMapWc : kMapCached;
  }
  return 0;
}

int ContextMemory::attach_foreign(uint32_t res_id, UniqueFd dmabuf, uint64_t size,
                                  std::shared_ptr<const void> exporter_charge) {
  if (!free_res_id(res_id) || !dmabuf) return -EINVAL;
  const off_t real = lseek(dmabuf.get(), 0, SEEK_END);
  if (real <= 0) return -EINVAL;
  if (size == 0 || size > static_cast<uint64_t>(real)) size = static_cast<uint64_t>(real);
  uint32_t h;
  std::shared_ptr<MemoryObject> owner;
  int err = registry_->import(dmabuf.get(), &h, &owner, [&](uint32_t handle) {
    // A new kernel object: charged. A handle we own already (below) costs nothing more.
    if (int e = usage_->charge(Usage::Pool::kOther, 0)) {
      dev_->gem_close(handle);
      return e;
    }
    auto obj =
        MemoryObject::adopt_one(dev_, MemoryObject::Kind::kImported, 0, {handle, size}, false);
    obj->set_charge(Charge(usage_, Usage::Pool::kOther, 0));
    registry_->add(obj);
    owner = std::move(obj);
    return 0;
  });
  if (err) return err;
  // A handle we own already (our own BO re-attached, or a dma-buf imported twice): the same
  // object, so exactly one owner closes the handle.
  // Only the userptr resource that made an object revokes it: another name for it is foreign.
  const Resource::Kind kind =
      owner->kind() == MemoryObject::Kind::kBo ? Resource::Kind::kBo : Resource::Kind::kForeign;
  // Our own object come back is charged already; an import charges nothing of its own (kOther,
  // no bytes), so without the exporter's charge a guest could free and unref memory that another
  // of its contexts still maps, and make more, outside every quota.
  if (owner->kind() == MemoryObject::Kind::kImported && exporter_charge)
    owner->hold_exporter_charge(std::move(exporter_charge));
  resources_[res_id] = Resource{kind, std::move(owner)};
  return 0;
}

bool ContextMemory::guest_pages_gpu_mapped(uint32_t res_id) const {
  auto it = resources_.find(res_id);
  return it != resources_.end() && it->second.gpu_reachable_guest_pages();
}

bool ContextMemory::any_guest_pages_gpu_mapped() const {
  for (const auto &[id, r] : resources_)
    if (r.gpu_reachable_guest_pages()) return true;
  return false;
}

void ContextMemory::detach_resource(uint32_t res_id) {
  auto it = resources_.find(res_id);
  if (it == resources_.end()) return;
  // Guest pages behind a userptr blob may be reused by the guest, and unmapped by the VMM, once
  // the VMM drops the blob: the GPU stops seeing them and every host writer stops now.
  if (it->second.kind == Resource::Kind::kUserptr) {
    unmap_object(it->second.object.get());
    drop_unmapped_from_bo_list();  // the VMM's call: the pages go before it returns
    it->second.object->revoke();
  }
  resources_.erase(it);
}

int ContextMemory::export_resource(uint32_t res_id, BlobExport *out) {
  auto it = resources_.find(res_id);
  if (it == resources_.end()) return -ENOENT;
  const Resource &r = it->second;
  switch (r.kind) {
    case Resource::Kind::kSharedPage:
      return -EINVAL;  // the caller's
    case Resource::Kind::kBo:
    case Resource::Kind::kForeign:
      return export_object(*r.object, out);
    case Resource::Kind::kUserptr:
      return -EOPNOTSUPP;  // the VMM owns those pages already
  }
  return -EINVAL;
}

int ContextMemory::charge_host_buffer(uint64_t bytes, Charge *out) {
  if (int e = usage_->charge(Usage::Pool::kGtt, bytes, 0)) return e;
  *out = Charge(usage_, Usage::Pool::kGtt, bytes, 0);
  return 0;
}

int ContextMemory::lookup_object(uint32_t bo, uint32_t res_id,
                                 std::shared_ptr<MemoryObject> *out) const {
  if ((bo == 0) == (res_id == 0)) return -EINVAL;
  if (bo) {
    *out = bos_.get_shared(bo);
  } else {
    auto it = resources_.find(res_id);
    *out = it == resources_.end() ? nullptr : it->second.object;
  }
  return *out ? 0 : -ENOENT;
}

void ContextMemory::unmap_pieces(const VaMapping &m) {
  // Guest pages are the ones handed back while a user queue may run: their updates are tracked.
  // One pointer captured, so the std::function holds it without allocating (detach and unref
  // allocate nothing).
  struct Unmap {
    ContextMemory &mem;
    const VaMapping &m;
    VmUpdateTimeline *tracked;
  } u{*this, m, m.object->kind() == MemoryObject::Kind::kUserptr ? vm_updates_.get() : nullptr};
  m.object->for_each_piece(
      m.offset, m.size, [&u](uint32_t handle, uint64_t off, uint64_t gpu_off, uint64_t len) {
        if (u.tracked)
          u.tracked->unmap(handle, u.m.va + gpu_off, off, len);
        else
          u.mem.dev_->gem_va(AMDGPU_VA_OP_UNMAP, handle, u.m.va + gpu_off, off, len, 0);
        u.mem.resident_.remove(handle);
      });
}

void ContextMemory::wait_guest_pages_unmapped(int64_t abs_deadline_ns) {
  if (vm_updates_ && vm_updates_->last_point())
    vm_updates_->wait(vm_updates_->last_point(), abs_deadline_ns);
}

void ContextMemory::drop_unmapped_from_bo_list() {
  // The kernel's BO list holds references too: an unmapped object must not live on through it.
  // If the update fails the old list would keep it (a revoked userptr's pages with it): the list
  // goes instead, and the next submission makes a new one.
  bo_list_stale_ = false;
  uint32_t list;
  try {
    if (bo_list_.sync(resident_, &list) == 0) return;
  } catch (const std::bad_alloc &) {
  }
  bo_list_.destroy();
}

void ContextMemory::unmap(const VaMapping &m) {
  unmap_pieces(m);
  bo_list_stale_ = true;
}

void ContextMemory::unmap_object(const MemoryObject *obj) {
  va_.take_object(obj, [&](const VaMapping &m) {
    forget(m);
    unmap_pieces(m);
  });
  bo_list_stale_ = true;
}

MemoryStats ContextMemory::stats() const {
  MemoryStats s;
  s.bos = bos_.size();
  s.resources = static_cast<uint32_t>(resources_.size());
  s.va_mappings = static_cast<uint32_t>(va_.count());
  s.blob_ids = static_cast<uint32_t>(registry_->blob_ids());
  s.owned_handles = static_cast<uint32_t>(registry_->handles());
  s.usage = usage_->snapshot();
  s.last_userptr_strategy = last_userptr_strategy_;
  s.last_userptr_objects = last_userptr_objects_;
  if (vm_updates_) s.vm_updates_untracked = vm_updates_->untracked();
  return s;
}

}  // namespace rvgl
