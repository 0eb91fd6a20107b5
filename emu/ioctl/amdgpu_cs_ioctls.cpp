// DRM_AMDGPU_CS (amdgpu_cs.c): parse the chunk array, resolve every handle now (errors are the
// ioctl's), hand the job to its ring, return the sequence number.
#include <amdgpu_drm.h>

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "core/counters.h"
#include "core/device.h"
#include "core/emulator.h"
#include "ioctl/handlers.h"
#include "memory/backing.h"
#include "util/user_memory.h"

namespace rvgl::emu {

namespace {

// Not a kernel limit, a sanity bound on what one CS may ask the emulator to copy.
constexpr uint32_t kMaxChunks = 4096;
constexpr uint32_t kMaxChunkBytes = 1u << 22;

// The kernel's PAGE_SIZE: the host's.
uint64_t page_size() {
  static const auto page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  return page;
}

struct OutSyncobj {
  std::shared_ptr<Syncobj> syncobj;
  uint64_t point;  // 0: binary replace
};

struct Parsed {
  const Context *ctx = nullptr;
  std::vector<IbRange> ibs;
  bool have_entity = false;
  EntityKey entity;
  std::vector<JobDependency> deps;
  std::vector<OutSyncobj> outs;
  std::shared_ptr<BufferObject> user_fence_bo;
  uint64_t user_fence_offset = 0;
  bool have_bo_handles = false;
  BoList bos;
};

template <typename T>
std::vector<T> as_array(const std::vector<uint8_t> &bytes) {
  std::vector<T> out(bytes.size() / sizeof(T));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(T));
  return out;
}

int parse_ib(DeviceFile &f, const std::vector<uint8_t> &bytes, Parsed &p) {
  if (bytes.size() < sizeof(drm_amdgpu_cs_chunk_ib)) return -EINVAL;
  drm_amdgpu_cs_chunk_ib ib;
  std::memcpy(&ib, bytes.data(), sizeof(ib));
  if (int r = validate_entity(f.device, ib.ip_type, ib.ip_instance, ib.ring)) return r;
  const EntityKey key{ib.ip_type, ib.ip_instance, ib.ring};
  // amdgpu_cs_job_idx() -> amdgpu_ctx_get_entity(): an entity in error takes no more jobs.
  if (int r = p.ctx->entity_error(key)) return r;
  // Gang submissions (IBs for several engines in one CS) are not emulated.
  if (p.have_entity && !(p.entity == key)) return -EINVAL;
  p.entity = key;
  p.have_entity = true;
  p.ibs.push_back({ib.va_start, ib.ib_bytes});
  return 0;
}

int parse_dependencies(DeviceFile &f, const std::vector<uint8_t> &bytes, Parsed &p) {
  for (const auto &dep : as_array<drm_amdgpu_cs_chunk_dep>(bytes)) {
    std::shared_ptr<Fence> fence;
    if (int r = lookup_job_fence(f, dep.ctx_id, dep.ip_type, dep.ip_instance, dep.ring, dep.handle,
                                 fence))
      return r;
    if (fence) p.deps.push_back({fence, nullptr, 0});
  }
  return 0;
}

int parse_syncobj_in(DeviceFile &f, uint32_t handle, uint64_t point, uint32_t flags, Parsed &p) {
  auto s = f.syncobjs.get(handle);
  if (!s) return -ENOENT;
  std::lock_guard lk(FenceDomain::mutex());
  if (!s->available_locked(point) && !(flags & DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT))
    return -EINVAL;
  // Resolved when the job is ready to run: a point submitted later still counts.
  p.deps.push_back({nullptr, std::move(s), point});
  return 0;
}

int parse_chunk(DeviceFile &f, uint32_t id, const std::vector<uint8_t> &bytes, Parsed &p) {
  switch (id) {
    case AMDGPU_CHUNK_ID_IB:
      return parse_ib(f, bytes, p);
    case AMDGPU_CHUNK_ID_FENCE: {
      if (bytes.size() < sizeof(drm_amdgpu_cs_chunk_fence)) return -EINVAL;
      drm_amdgpu_cs_chunk_fence fc;
      std::memcpy(&fc, bytes.data(), sizeof(fc));
      auto bo = f.bo(fc.handle);
      // amdgpu_cs_p1_user_fence(): an existing, non-userptr object of exactly one page, with the
      // 8 bytes inside it.
      if (!bo || bo->userptr() || bo->size() != page_size() || uint64_t{fc.offset} + 8 > bo->size())
        return -EINVAL;
      p.user_fence_bo = std::move(bo);
      p.user_fence_offset = fc.offset;
      return 0;
    }
    case AMDGPU_CHUNK_ID_DEPENDENCIES:
    case AMDGPU_CHUNK_ID_SCHEDULED_DEPENDENCIES:
      return parse_dependencies(f, bytes, p);
    case AMDGPU_CHUNK_ID_SYNCOBJ_IN:
      for (const auto &sem : as_array<drm_amdgpu_cs_chunk_sem>(bytes))
        if (int r = parse_syncobj_in(f, sem.handle, 0, 0, p)) return r;
      return 0;
    case AMDGPU_CHUNK_ID_SYNCOBJ_TIMELINE_WAIT:
      for (const auto &s : as_array<drm_amdgpu_cs_chunk_syncobj>(bytes))
        if (int r = parse_syncobj_in(f, s.handle, s.point, s.flags, p)) return r;
      return 0;
    case AMDGPU_CHUNK_ID_SYNCOBJ_OUT:
      for (const auto &sem : as_array<drm_amdgpu_cs_chunk_sem>(bytes)) {
        auto s = f.syncobjs.get(sem.handle);
        if (!s) return -EINVAL;
        p.outs.push_back({std::move(s), 0});
      }
      return 0;
    case AMDGPU_CHUNK_ID_SYNCOBJ_TIMELINE_SIGNAL:
      for (const auto &so : as_array<drm_amdgpu_cs_chunk_syncobj>(bytes)) {
        auto s = f.syncobjs.get(so.handle);
        if (!s) return -EINVAL;
        p.outs.push_back({std::move(s), so.point});
      }
      return 0;
    case AMDGPU_CHUNK_ID_BO_HANDLES: {
      if (bytes.size() < sizeof(drm_amdgpu_bo_list_in)) return -EINVAL;
      drm_amdgpu_bo_list_in in;
      std::memcpy(&in, bytes.data(), sizeof(in));
      p.have_bo_handles = true;
      std::vector<std::shared_ptr<BufferObject>> list;
      if (int r = read_bo_list(f, in.bo_info_ptr, in.bo_number, in.bo_info_size, list)) return r;
      p.bos = std::make_shared<const BoList::element_type>(std::move(list));
      return 0;
    }
    case 0x0a:  // AMDGPU_CHUNK_ID_CP_GFX_SHADOW: shadow buffers have no effect here
      return 0;
    default:
      return -EINVAL;
  }
}

}  // namespace

int amdgpu_ioctl_cs(DeviceFile &f, void *data) {
  auto *a = static_cast<drm_amdgpu_cs *>(data);
  const auto in = a->in;
  Device &d = f.device;
  // amdgpu_cs_parser_init(): amdgpu_ctx_get(), before the state lock (it waits while a FREE_CTX
  // drains). The reference goes after the lock at the end (destruction order): if the context was
  // freed meanwhile, this CS releases it, and waits for its entities as FREE_CTX would have.
  ContextRef ctx = ctx_get(f, in.ctx_id);
  if (!ctx) return -EINVAL;
  std::unique_lock lk(Emulator::get().mutex());
  // amdgpu_cs_parser_init(): a guilty context, or one from before a VRAM loss, submits nothing.
  if (ctx->guilty.load()) return -ECANCELED;
  if (ctx->vram_lost_counter_at_create() != d.resets().vram_lost.load()) return -ECANCELED;
  if (in.num_chunks == 0 || in.num_chunks > kMaxChunks) return -EINVAL;

  std::vector<uint64_t> chunk_ptrs(in.num_chunks);
  if (copy_from_user(chunk_ptrs.data(), in.chunks, chunk_ptrs.size() * sizeof(uint64_t)))
    return -EFAULT;
  Parsed p;
  p.ctx = &*ctx;
  std::vector<uint8_t> bytes;
  for (uint64_t ptr : chunk_ptrs) {
    drm_amdgpu_cs_chunk chunk;
    if (copy_from_user(&chunk, ptr, sizeof(chunk))) return -EFAULT;
    const uint64_t size = uint64_t{chunk.length_dw} * 4;
    if (size > kMaxChunkBytes) return -EINVAL;
    bytes.resize(size);
    if (copy_from_user(bytes.data(), chunk.chunk_data, size)) return -EFAULT;
    if (int r = parse_chunk(f, chunk.chunk_id, bytes, p)) return r;
  }
  if (p.ibs.empty()) return -EINVAL;
  if (in.bo_list_handle) {
    if (p.have_bo_handles) return -EINVAL;
    auto *list = f.bo_lists.find(in.bo_list_handle);
    if (!list) return -ENOENT;
    p.bos = *list;
  }
  if (p.ibs.size() > d.ip_block(p.entity.ip)->max_ibs) return -EINVAL;
  // amdgpu_cs_parser_bos(): the pages of every userptr object the list names are looked up again
  // (amdgpu_ttm_tt_get_user_pages() per entry, every CS), so one the process unmapped since fails
  // the submission. Without the state lock: the kernel holds only the process's mmap lock there,
  // and the parse's references keep the list alive.
  const auto userptr_of = [](const std::shared_ptr<BufferObject> &bo) {
    return bo->backing()->kind() == Backing::Kind::Userptr
               ? static_cast<const UserptrBacking *>(bo->backing().get())
               : nullptr;
  };
  if (p.bos && std::any_of(p.bos->begin(), p.bos->end(), userptr_of)) {
    lk.unlock();
    for (const auto &bo : *p.bos)
      if (const UserptrBacking *u = userptr_of(bo))
        if (int r = u->get_user_pages()) return r;
    lk.lock();
  }
  // amdgpu_cs_sync_rings() -> amdgpu_ctx_wait_prev_fence(): the job that would take the slot of one
  // still running, amdgpu_sched_jobs (32) sequence numbers back, waits inside the ioctl until that
  // one has finished (dma_fence_wait(other, true): no timeout; a hung one ends when the timeout
  // handler ends it). Waited for without the state lock, which the ring workers and other files
  // need; what the parse resolved stays referenced meanwhile (the kernel holds it too). Looked at
  // again afterwards: another thread's CS on the entity may have taken the slot meanwhile.
  for (;;) {
    std::shared_ptr<Fence> prev;
    {
      std::lock_guard clk(f.contexts.mutex());
      prev = ctx->prev_fence(p.entity);
    }
    if (!prev) break;
    lk.unlock();
    prev->wait(never());
    lk.lock();
  }
  // Implicit sync (amdgpu_cs_sync_rings -> amdgpu_sync_resv): the job waits for every fence
  // another VM's submission left on a listed object, unless the object was created with
  // EXPLICIT_SYNC (amdgpu_bo_explicit_sync: AMDGPU_SYNC_EXPLICIT); a file's own fences it does
  // not wait for (AMDGPU_SYNC_NE_OWNER). Taken at CS time, as the kernel takes them.
  if (p.bos) {
    std::lock_guard flk(FenceDomain::mutex());
    for (const auto &bo : *p.bos) {
      if (bo->domain_flags() & AMDGPU_GEM_CREATE_EXPLICIT_SYNC) continue;
      for (const ResvFence &r : bo->fences)
        if (r.owner != f.vm.get() && !r.fence->is_signaled_locked())
          p.deps.push_back({r.fence, nullptr, 0});
    }
  }

  RingWorker &worker = d.ring(p.entity.ip, p.entity.ring);
  auto job = std::make_unique<Job>();
  job->vm = f.vm;
  job->vm_ticket = GpuVm::Ticket(f.vm);
  job->ctx = ctx.shared();
  job->ip = p.entity.ip;
  job->ring = p.entity.ring;
  job->ibs = std::move(p.ibs);
  job->deps = std::move(p.deps);
  {
    std::lock_guard clk(f.contexts.mutex());
    job->fence = ctx->new_job_fence(p.entity);
    job->seq = ctx->add_fence(p.entity, job->fence);
    ctx->set_worker(p.entity, &worker);
  }
  job->ordinal = ++ctx->jobs_submitted;
  job->user_fence_bo = std::move(p.user_fence_bo);
  job->user_fence_offset = p.user_fence_offset;
  {
    std::lock_guard flk(FenceDomain::mutex());
    for (const auto &o : p.outs) {
      if (o.point)
        o.syncobj->add_point_locked(o.point, job->fence);
      else
        o.syncobj->replace_locked(job->fence);
    }
    // dma_resv_add_fence(): a fence replaces one of its own timeline (which it follows) and any
    // that has signalled, so an object holds one fence per timeline, not one per job.
    const uint64_t timeline = job->fence->context();
    if (p.bos) {
      for (const auto &bo : *p.bos) {
        std::erase_if(bo->fences, [timeline](const ResvFence &r) {
          return r.fence->context() == timeline || r.fence->is_signaled_locked();
        });
        bo->fences.push_back({job->fence, f.vm.get()});
      }
    }
  }
  job->bos = std::move(p.bos);
  const uint64_t seq = job->seq;
  ++f.jobs_submitted;
  counters().jobs_submitted.fetch_add(1, std::memory_order_relaxed);
  worker.submit(std::move(job));
  std::memset(a, 0, sizeof(*a));
  a->out.handle = seq;
  return 0;
}

}  // namespace rvgl::emu
