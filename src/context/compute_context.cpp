#include "context/compute_context.h"

#include <unistd.h>

#include <cerrno>

#include "amdgpu/render_node.h"
#include "context/command_layouts.h"

namespace rvgl {

namespace {

// virglrenderer.h values, repeated so the context does not depend on virglrenderer's header.
constexpr uint32_t kFdTypeShm = 3;  // VIRGL_RENDERER_BLOB_FD_TYPE_SHM
constexpr uint32_t kMapCached = 1;  // VIRGL_RENDERER_MAP_CACHE_CACHED

std::shared_ptr<AmdgpuDevice> open_device(const Config &cfg, UniqueFd vmm_fd, int *err) {
  if (vmm_fd) return AmdgpuDevice::adopt_private(std::move(vmm_fd), err);
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
      queues_(opts.config->limits.max_queues) {}

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
  c->memory_ = std::make_unique<ContextMemory>(c->dev_, cap.features, cap, opts.config->limits);
  c->retirer_ = FenceRetirer::create(c->dev_, opts.async_fences, std::move(opts.on_fence), err);
  if (!c->retirer_) return nullptr;
  c->retirer_->set_watch_callback([p = c.get()](uint32_t queue) { p->on_queue_drained(queue); });
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
  // SPM workers first (they write responses into the shared page and kick the retirer), then the
  // retire thread, so no callback runs once the VMM believes we are gone. Then queues (their
  // kernel contexts), mappings and objects; the device fd closes last, when the final object
  // holding it dies.
  for (uint32_t xcp = 0; xcp < spm_.size(); ++xcp)
    release_spm(xcp);
  retirer_.reset();
  events_.reset();
  queues_.clear();
  memory_.reset();  // unmaps everything and revokes every use of the guest's pages
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

int ComputeContext::create_fence(uint32_t ring_idx, uint64_t fence_id) {
  if (ring_idx >= RVGL_RING_COUNT) return -EINVAL;
  std::shared_ptr<SyncTimeline> tl;
  uint64_t point = 0;
  if (rings_[ring_idx] == RingUse::kQueue) {
    const Queue *q = queues_.get(ring_queue_[ring_idx]);
    if (q && q->kernel && q->kernel->last_submitted()) {
      tl = q->kernel->timeline();
      point = q->kernel->last_submitted();
    }
  } else if (ring_idx == RVGL_RING_EVENTS) {
    // Retires at once while the guest has unread records, else with the next record.
    if (events_ && !events_->unread()) {
      tl = events_->timeline();
      point = events_->points() + 1;
    }
  } else if (rings_[ring_idx] == RingUse::kSpm) {
    const SpmSession *s = spm_[ring_queue_[ring_idx]].get();
    if (s && s->accepted()) {
      tl = s->timeline();
      point = s->accepted();
    }
  }
  retirer_->add(ring_idx, fence_id, std::move(tl), point);
  return 0;
}

// ---- blobs and resources ----

int ComputeContext::create_blob(const BlobArgs &args, BlobExport *out) {
  if (!memory_->free_res_id(args.res_id)) return -EINVAL;
  if (args.blob_mem == RVGL_BLOB_MEM_HOST3D && args.blob_id == RVGL_BLOB_ID_SHMEM &&
      !(args.blob_flags & (RVGL_BLOB_FLAG_USERPTR | RVGL_BLOB_FLAG_USERPTR_RDONLY)))
    return create_shared_page(args, out);
  return memory_->create_blob(args, out);
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
  if (facts_.capset.features & RVGL_FEATURE_EVENT_RING) {
    auto tl = SyncTimeline::create(dev_, &err);
    if (!tl) {
      shmem_.reset();
      return err;
    }
    FenceRetirer *r = retirer_.get();
    events_ = std::make_unique<EventRing>(shmem_->view(), std::move(tl), [r] { r->kick(); });
  }
  return memory_->add_shared_page(args.res_id);
}

int ComputeContext::export_resource(uint32_t res_id, BlobExport *out) {
  if (!memory_->is_shared_page(res_id)) return memory_->export_resource(res_id, out);
  out->fd = shmem_->dup_fd();
  if (!out->fd) return -EMFILE;
  out->fd_type = kFdTypeShm;
  out->map_info = kMapCached;
  out->size = RVGL_SHMEM_SIZE;
  return 0;
}

// ---- health and events ----

void ComputeContext::post_event(uint32_t type, uint32_t queue, uint64_t p0, uint64_t p1) {
  if (events_) events_->post(type, queue, p0, p1);
}

void ComputeContext::on_queue_drained(uint32_t handle) {
  std::shared_ptr<KernelQueue> q;
  {
    std::lock_guard lk(health_mu_);
    auto it = health_queues_.find(handle);
    if (it == health_queues_.end()) return;
    q = it->second;
  }
  check_queue(handle, *q);
}

void ComputeContext::check_queue(uint32_t handle, KernelQueue &q) {
  const KernelQueue::Observation o = q.observe();
  uint32_t flags = 0;
  bool lost = o.job_error != 0;
  if (o.ctx_flags & AMDGPU_CTX_QUERY2_FLAGS_GUILTY) {
    flags |= RVGL_QUEUE_FLAG_GUILTY;
    lost = true;
  } else if (o.ctx_flags & AMDGPU_CTX_QUERY2_FLAGS_RESET) {
    flags |= RVGL_QUEUE_FLAG_INNOCENT;  // another context's hang reset the GPU under us
  }
  if (o.ctx_flags & AMDGPU_CTX_QUERY2_FLAGS_VRAMLOST) {
    flags |= RVGL_QUEUE_FLAG_VRAM_LOST;
    lost = true;
  }
  rvgl_drm_amdgpu_info_gpuvm_fault fault{};
  if (lost) {
    // The VM's last fault tells a fault from a hang; each distinct fault is reported once.
    std::lock_guard lk(fault_mu_);
    if (dev_->query_gpuvm_fault(&fault) == 0 && fault.status &&
        (fault.addr != last_fault_.addr || fault.status != last_fault_.status)) {
      last_fault_ = fault;
      flags |= RVGL_QUEUE_FLAG_VM_FAULT;
    } else {
      fault = {};
      if (o.job_error == -ETIME) flags |= RVGL_QUEUE_FLAG_HANG;
    }
  }
  const uint32_t fresh = q.merge(flags, lost, o.job_error);
  if (!fresh) return;
  const uint64_t done = q.last_completed();
  if (fresh & RVGL_QUEUE_FLAG_VM_FAULT)
    post_event(RVGL_EVENT_VM_FAULT, handle, fault.addr,
               fault.status | (uint64_t{fault.vmhub} << 32));
  if (fresh & RVGL_QUEUE_FLAG_HANG) {
    const uint64_t seq = q.first_failed_seq();
    post_event(RVGL_EVENT_QUEUE_HANG, handle, seq ? seq : done, 0);
  }
  const uint64_t vram = (fresh & RVGL_QUEUE_FLAG_VRAM_LOST) ? RVGL_EVENT_RESET_VRAM_LOST : 0;
  if (fresh & RVGL_QUEUE_FLAG_GUILTY)
    post_event(RVGL_EVENT_QUEUE_RESET, handle, RVGL_EVENT_RESET_GUILTY | vram, done);
  else if (fresh & (RVGL_QUEUE_FLAG_INNOCENT | RVGL_QUEUE_FLAG_VRAM_LOST))
    post_event(RVGL_EVENT_QUEUE_RESET, handle, RVGL_EVENT_RESET_INNOCENT | vram, done);
  if (vram && !vram_lost_reported_.exchange(true))
    post_event(RVGL_EVENT_DEVICE_RESET, RVGL_EVENT_QUEUE_NONE, RVGL_EVENT_RESET_VRAM_LOST, 0);
}

ContextStats ComputeContext::stats() const {
  ContextStats s;
  static_cast<MemoryStats &>(s) = memory_->stats();
  s.queues = queues_.size();
  return s;
}

}  // namespace rvgl
