#include "context/compute_context.h"

#include <unistd.h>

#include <cerrno>

#include "amdgpu/render_node.h"
#include "context/command_layouts.h"

namespace rvgl {

namespace {

// virglrenderer.h values, repeated so the context does not depend on virglrenderer's header.
constexpr uint32_t kFdTypeDmabuf = 1;  // VIRGL_RENDERER_BLOB_FD_TYPE_DMABUF
constexpr uint32_t kFdTypeShm = 3;     // VIRGL_RENDERER_BLOB_FD_TYPE_SHM
constexpr uint32_t kMapCached = 1;     // VIRGL_RENDERER_MAP_CACHE_CACHED
constexpr uint32_t kMapUncached = 2;   // VIRGL_RENDERER_MAP_CACHE_UNCACHED
constexpr uint32_t kMapWc = 3;         // VIRGL_RENDERER_MAP_CACHE_WC

std::shared_ptr<AmdgpuDevice> open_device(const Config &cfg, UniqueFd vmm_fd, int *err) {
  if (vmm_fd) return AmdgpuDevice::adopt(std::move(vmm_fd), err);
  const std::string node = choose_render_node(cfg.render_node);
  if (node.empty()) {
    *err = -ENODEV;
    return nullptr;
  }
  return AmdgpuDevice::open(node, err);
}

}  // namespace

uint64_t ComputeContext::implemented_features() {
  // Foreign imports: attach_foreign, reached through vrend-hooks' ctx_attach_resource.
  return RVGL_FEATURE_USERPTR | RVGL_FEATURE_USERPTR_RDONLY | RVGL_FEATURE_KERNEL_QUEUES |
         RVGL_FEATURE_USER_QUEUES | RVGL_FEATURE_SPM | RVGL_FEATURE_RESOURCE_IMPORT |
         RVGL_FEATURE_EVENT_RING;
}

int ComputeContext::probe_capset(const Config &cfg, rvgl_capset *out) {
  int err;
  auto dev = open_device(cfg, UniqueFd(), &err);
  if (!dev) return err;
  DeviceFacts f;
  if ((err = probe_device(*dev, cfg, implemented_features(), &f))) return err;
  *out = f.capset;
  return 0;
}

const CommandTable &ComputeContext::table() {
  static const CommandTable t = [] {
    CommandTable t;
    auto add = [&](uint32_t cmd, Handler h) {
      const CommandLayout *l = find_layout(cmd);
      t.set(cmd, {l->name, h, l->req_size, l->rsp_size});
    };
    using C = ComputeContext;
    add(RVGL_CMD_NOP, bind_handler<C, &C::cmd_nop>);
    add(RVGL_CMD_QUERY_INFO, bind_handler<C, &C::cmd_query_info>);
    add(RVGL_CMD_BO_CREATE, bind_handler<C, &C::cmd_bo_create>);
    add(RVGL_CMD_BO_FREE, bind_handler<C, &C::cmd_bo_free>);
    add(RVGL_CMD_VA_MAP, bind_handler<C, &C::cmd_va_map>);
    add(RVGL_CMD_VA_UNMAP, bind_handler<C, &C::cmd_va_unmap>);
    add(RVGL_CMD_QUEUE_CREATE, bind_handler<C, &C::cmd_queue_create>);
    add(RVGL_CMD_QUEUE_DESTROY, bind_handler<C, &C::cmd_queue_destroy>);
    add(RVGL_CMD_SUBMIT, bind_handler<C, &C::cmd_submit>);
    add(RVGL_CMD_QUEUE_STATE, bind_handler<C, &C::cmd_queue_state>);
    add(RVGL_CMD_SPM_ACQUIRE, bind_handler<C, &C::cmd_spm_acquire>);
    add(RVGL_CMD_SPM_RELEASE, bind_handler<C, &C::cmd_spm_release>);
    add(RVGL_CMD_SPM_SET_DEST, bind_handler<C, &C::cmd_spm_set_dest>);
    return t;
  }();
  return t;
}

ComputeContext::ComputeContext(const Options &opts)
    : ctx_id_(opts.ctx_id),
      config_(*opts.config),
      limits_(opts.config->limits),
      decoder_(table(), this, opts.config->limits.max_submit_bytes),
      bos_(opts.config->limits.max_objects),
      va_(0, 0, 4096),
      queues_(opts.config->limits.max_queues),
      // delivery_ is set in create(), before any thread can post.
      events_([this] { delivery_->progress(); }) {}

std::unique_ptr<ComputeContext> ComputeContext::create(Options opts, int *err) {
  if (!opts.config || !opts.on_fence) {
    *err = -EINVAL;
    return nullptr;
  }
  std::unique_ptr<ComputeContext> c(new ComputeContext(opts));
  c->dev_ = open_device(*opts.config, std::move(opts.drm_fd), err);
  if (!c->dev_) return nullptr;
  if ((*err = probe_device(*c->dev_, *opts.config, implemented_features(), &c->facts_)))
    return nullptr;
  const rvgl_capset &cap = c->facts_.capset;
  c->va_ = VaSpace(cap.va_start, cap.va_end, cap.va_alignment);
  const auto &l = opts.config->limits;
  c->usage_ = std::make_shared<Usage>(l.max_objects, std::min(l.max_vram_bytes, cap.vram_size),
                                      std::min(l.max_gtt_bytes, cap.gtt_size), l.max_userptr_bytes);
  c->bo_list_ = std::make_unique<KernelBoList>(c->dev_);
  c->delivery_ = FenceDelivery::create(opts.async_fences, std::move(opts.on_fence), err);
  if (!c->delivery_) return nullptr;
  c->engine_ = CompletionEngine::acquire(*c->dev_, err);
  if (!c->engine_) return nullptr;
  CompletionEngine *engine = c->engine_.get();
  c->health_ = std::make_unique<QueueHealth>(c->dev_, c->events_, [engine] { engine->rearm(); });
  if ((*err = c->engine_->add_timer(c->health_.get(), &c->health_timer_))) return nullptr;
  if (!opts.config->capture_dir.empty()) {
    c->capture_ = CaptureWriter::open(opts.config->capture_dir, c->ctx_id_, opts.config->capset_id);
    if (CaptureWriter *w = c->capture_.get())
      c->decoder_.set_observer([w](uint32_t cmd, uint32_t seqno, std::span<const uint8_t> rsp) {
        w->response(cmd, seqno, rsp);
      });
  }
  *err = 0;
  return c;
}

ComputeContext::~ComputeContext() {
  // SPM workers first (they write responses into the shared page and post fences), then every
  // completion-engine watch (after remove() the engine never calls them), then fence delivery, so
  // no callback runs once the VMM believes we are gone. Then queues (their kernel contexts),
  // mappings and objects; the device fd closes last, when the final object holding it dies.
  for (uint32_t xcp = 0; xcp < spm_.size(); ++xcp)
    release_spm(xcp);
  if (engine_) {
    queues_.for_each([&](uint32_t, Queue &q) { unwatch_queue(q); });
    for (auto &d : draining_)
      engine_->remove(d.id);
    draining_.clear();
    if (health_timer_) engine_->remove(health_timer_);
  }
  if (delivery_) delivery_->stop();
  queues_.clear();
  for (auto &m : va_.take_all())
    unmap(m);
  resources_.clear();
  parked_blobs_.clear();
  bos_.clear();
}

int ComputeContext::submit_cmd(std::span<const uint8_t> cmds) {
  ShmemView &view = shmem_ ? shmem_->view() : no_shmem_;
  if (!capture_) return decoder_.run(cmds, view).error;
  capture_->submit(cmds);
  const int r = decoder_.run(cmds, view).error;
  capture_->done(r);
  return r;
}

// ---- fences ----

int ComputeContext::create_fence(uint32_t ring_idx, uint64_t fence_id, bool mergeable) {
  if (ring_idx >= RVGL_RING_COUNT) return -EINVAL;
  collect_drained();
  std::shared_ptr<const FenceSource> src;
  uint64_t point = 0;
  if (rings_[ring_idx] == RingUse::kQueue) {
    const Queue *q = queues_.get(ring_queue_[ring_idx]);
    if (q && q->kernel && q->kernel->last_submitted()) {
      src = q->kernel->timeline();
      point = q->kernel->last_submitted();
    }
  } else if (ring_idx == RVGL_RING_EVENTS) {
    // Retires at once while the guest has unread records, else with the next record. The ring
    // lives as long as the context, which outlives every pending fence: an aliasing pointer.
    if (events_.attached() && !events_.unread()) {
      src = std::shared_ptr<const FenceSource>(std::shared_ptr<void>(), &events_);
      point = events_.points() + 1;
    }
  } else if (rings_[ring_idx] == RingUse::kSpm) {
    const SpmSession *s = spm_[ring_queue_[ring_idx]].get();
    if (s && s->accepted()) {
      src = s->timeline();
      point = s->accepted();
    }
  }
  // No ioctl and no wakeup: the completion engine already waits at or before `point` (see
  // queue_watch.h); work already done is delivered from inside add().
  delivery_->add(ring_idx, fence_id, std::move(src), point, mergeable);
  return 0;
}

void ComputeContext::unwatch_queue(Queue &q) {
  if (!q.watch) return;
  engine_->remove(q.watch_id);
  q.watch.reset();
  q.watch_id = 0;
}

void ComputeContext::collect_drained() {
  for (size_t i = 0; i < draining_.size();) {
    if (delivery_->references(draining_[i].watch->queue().timeline().get())) {
      ++i;
      continue;
    }
    engine_->remove(draining_[i].id);
    draining_.erase(draining_.begin() + static_cast<std::ptrdiff_t>(i));
  }
}

// ---- blobs and resources ----

int ComputeContext::create_blob(const BlobArgs &args, BlobExport *out) {
  if (args.res_id == 0 || resources_.count(args.res_id)) return -EINVAL;
  const bool userptr = args.blob_flags & (RVGL_BLOB_FLAG_USERPTR | RVGL_BLOB_FLAG_USERPTR_RDONLY);
  if (userptr &&
      (args.blob_mem == RVGL_BLOB_MEM_GUEST || args.blob_mem == RVGL_BLOB_MEM_HOST3D_GUEST))
    return create_userptr(args, out);
  if (args.blob_mem != RVGL_BLOB_MEM_HOST3D || userptr) return -EINVAL;
  return args.blob_id == RVGL_BLOB_ID_SHMEM ? create_shared_page(args, out) : claim_bo(args, out);
}

int ComputeContext::create_shared_page(const BlobArgs &args, BlobExport *out) {
  if (shmem_ || args.blob_flags != RVGL_BLOB_FLAG_USE_MAPPABLE || args.size != RVGL_SHMEM_SIZE)
    return -EINVAL;
  int err;
  shmem_ = SharedPage::create(&err);
  if (!shmem_) return err;
  out->fd = shmem_->dup_fd();
  if (!out->fd) {
    shmem_.reset();
    return -EMFILE;
  }
  out->fd_type = kFdTypeShm;
  out->map_info = kMapCached;
  out->size = RVGL_SHMEM_SIZE;
  if (facts_.capset.features & RVGL_FEATURE_EVENT_RING) events_.attach(shmem_->view());
  resources_[args.res_id] = Resource{Resource::Kind::kSharedPage, nullptr};
  return 0;
}

int ComputeContext::claim_bo(const BlobArgs &args, BlobExport *out) {
  auto it = parked_blobs_.find(args.blob_id);
  if (it == parked_blobs_.end()) return -ENOENT;
  const std::shared_ptr<MemoryObject> obj = it->second;
  if (args.size != obj->size()) return -EINVAL;
  const bool cpu_mappable =
      obj->domain() != RVGL_DOMAIN_VRAM || (obj->bo_flags() & RVGL_BO_FLAG_CPU_ACCESS);
  if ((args.blob_flags & RVGL_BLOB_FLAG_USE_MAPPABLE) && !cpu_mappable) return -EINVAL;
  if (int err = export_object(*obj, out)) return err;
  parked_blobs_.erase(it);
  resources_[args.res_id] = Resource{Resource::Kind::kBo, obj};
  return 0;
}

int ComputeContext::create_userptr(const BlobArgs &args, BlobExport *out) {
  if (!(facts_.capset.features & RVGL_FEATURE_USERPTR)) return -ENODEV;
  uint64_t total = 0;
  for (const auto &v : args.iov) {
    if (__builtin_add_overflow(total, v.iov_len, &total)) return -EINVAL;
  }
  if (args.iov.empty() || total != args.size || args.size == 0) return -EINVAL;
  const bool ro = args.blob_flags & RVGL_BLOB_FLAG_USERPTR_RDONLY;
  Charge charge;
  if (int err = usage_->charge(Usage::Pool::kUserptr, total)) return err;
  charge = Charge(usage_, Usage::Pool::kUserptr, total);

  UserptrOptions opt;
  const UsageSnapshot snap = usage_->snapshot();
  opt.max_objects = static_cast<uint32_t>(
      snap.objects < limits_.max_objects ? limits_.max_objects - snap.objects + 1 : 1);
  UserptrResult res;
  if (int err = import_userptr(dev_, args.iov, ro, opt, &res)) return err;
  res.object->set_charge(std::move(charge));
  last_userptr_strategy_ = res.strategy;
  last_userptr_objects_ = static_cast<uint32_t>(res.object->segments().size());
  resources_[args.res_id] = Resource{Resource::Kind::kUserptr, std::move(res.object)};
  out->fd_type = 0;
  out->size = total;
  out->map_info = kMapCached;
  return 0;
}

int ComputeContext::export_object(const MemoryObject &obj, BlobExport *out) {
  if (obj.segments().size() != 1) return -EINVAL;
  if (int err = dev_->prime_export(obj.segments()[0].handle, &out->fd)) return err;
  out->fd_type = kFdTypeDmabuf;
  out->size = obj.size();
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

int ComputeContext::attach_foreign(uint32_t res_id, UniqueFd dmabuf, uint64_t size) {
  if (res_id == 0 || resources_.count(res_id) || !dmabuf) return -EINVAL;
  const off_t real = lseek(dmabuf.get(), 0, SEEK_END);
  if (real <= 0) return -EINVAL;
  if (size == 0 || size > static_cast<uint64_t>(real)) size = static_cast<uint64_t>(real);
  if (int err = usage_->charge(Usage::Pool::kOther, 0)) return err;
  Charge charge(usage_, Usage::Pool::kOther, 0);
  uint32_t h;
  if (int err = dev_->prime_import(dmabuf.get(), &h)) return err;
  auto obj = std::make_shared<MemoryObject>(dev_, MemoryObject::Kind::kImported, 0,
                                            std::vector<MemoryObject::Segment>{{h, size}}, false);
  obj->set_charge(std::move(charge));
  resources_[res_id] = Resource{Resource::Kind::kForeign, std::move(obj)};
  return 0;
}

void ComputeContext::detach_resource(uint32_t res_id) {
  auto it = resources_.find(res_id);
  if (it == resources_.end()) return;
  // Guest pages behind a userptr blob may be reused by the guest once the VMM drops the blob:
  // the GPU must stop seeing them now, whatever the guest still has mapped.
  if (it->second.kind == Resource::Kind::kUserptr) unmap_object(it->second.object.get());
  resources_.erase(it);
}

int ComputeContext::export_resource(uint32_t res_id, BlobExport *out) {
  auto it = resources_.find(res_id);
  if (it == resources_.end()) return -ENOENT;
  const Resource &r = it->second;
  switch (r.kind) {
    case Resource::Kind::kSharedPage:
      out->fd = shmem_->dup_fd();
      if (!out->fd) return -EMFILE;
      out->fd_type = kFdTypeShm;
      out->map_info = kMapCached;
      out->size = RVGL_SHMEM_SIZE;
      return 0;
    case Resource::Kind::kBo:
    case Resource::Kind::kForeign:
      return export_object(*r.object, out);
    case Resource::Kind::kUserptr:
      return -EOPNOTSUPP;  // the VMM owns those pages already
  }
  return -EINVAL;
}

// ---- object helpers shared by handlers ----

int ComputeContext::lookup_object(uint32_t bo, uint32_t res_id,
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

void ComputeContext::unmap(const VaMapping &m) {
  m.object->for_each_piece(m.offset, m.size,
                           [&](uint32_t handle, uint64_t off, uint64_t gpu_off, uint64_t len) {
                             dev_->gem_va(AMDGPU_VA_OP_UNMAP, handle, m.va + gpu_off, off, len, 0);
                             resident_.remove(handle);
                           });
  // The kernel's BO list holds references too: an unmapped object must not live on through it.
  uint32_t list;
  bo_list_->sync(resident_, &list);
}

void ComputeContext::unmap_object(const MemoryObject *obj) {
  for (auto &m : va_.take_object(obj))
    unmap(m);
}

// ---- health and events ----

void ComputeContext::post_event(uint32_t type, uint32_t queue, uint64_t p0, uint64_t p1) {
  events_.post(type, queue, p0, p1);
  events_.notify();
}

ContextStats ComputeContext::stats() const {
  ContextStats s;
  s.bos = bos_.size();
  s.resources = static_cast<uint32_t>(resources_.size());
  s.queues = queues_.size();
  s.va_mappings = static_cast<uint32_t>(va_.count());
  s.usage = usage_->snapshot();
  s.last_userptr_strategy = last_userptr_strategy_;
  s.last_userptr_objects = last_userptr_objects_;
  return s;
}

}  // namespace rvgl
