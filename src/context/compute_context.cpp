#include "context/compute_context.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "amdgpu/render_node.h"
#include "context/command_layouts.h"
#include "util/monotonic_clock.h"

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
      descriptor_left_(opts.descriptor_left),
      decoder_(table(), this, opts.config->limits.max_submit_bytes),
      queues_(opts.config->limits.max_queues),
      // delivery_ is set in create(), before any thread can post.
      events_([this] { delivery_->progress(); }) {}

std::unique_ptr<ComputeContext> ComputeContext::create(Options opts, int *err) {
  if (!opts.config || !opts.on_fence) {
    *err = -EINVAL;
    return nullptr;
  }
  std::unique_ptr<ComputeContext> c(new ComputeContext(opts));
  // QUEUE_DESTROY never allocates: a watch that could not be kept would be freed while the
  // engine still holds it.
  c->draining_.reserve(opts.config->limits.max_queues);
  // A poll reports at most one point per watch (queue or destroyed queue): it allocates nothing.
  c->fired_.reserve(2 * size_t{opts.config->limits.max_queues});
  c->dev_ = open_device(*opts.config, std::move(opts.drm_fd), err);
  if (!c->dev_) return nullptr;
  if ((*err = probe_device(*c->dev_, *opts.config, implemented_features(), &c->facts_)))
    return nullptr;
  const rvgl_capset &cap = c->facts_.capset;
  c->memory_ = std::make_unique<ContextMemory>(c->dev_, cap.features, cap, opts.config->limits);
  c->delivery_ = FenceDelivery::create(opts.async_fences, std::move(opts.on_fence), err);
  if (!c->delivery_) return nullptr;
  c->engine_ = CompletionEngine::acquire(*c->dev_, err);
  if (!c->engine_) return nullptr;
  // Both hooks hold the engine: the health owner outlives engine_ (members die bottom-up), and a
  // rearm or a filing after the timer's removal is harmless.
  c->health_ = std::make_unique<QueueHealth>(c->dev_, c->events_,
                                             [engine = c->engine_] { engine->deadline_earlier(); });
  // Without its probe every check would count as a reset: a kernel that refuses a context now
  // refuses the guest's context too.
  if ((*err = c->health_->probe_error())) return nullptr;
  if ((*err = c->engine_->add_timer(c->health_.get(), &c->health_timer_))) return nullptr;
  c->health_->on_deadline_moved(
      [engine = c->engine_, id = c->health_timer_] { engine->deadline_moved(id); });
  if (!opts.config->capture_dir.empty()) {
    const Config &cfg = *opts.config;
    c->capture_ = CaptureWriter::open(
        cfg.capture_dir, c->ctx_id_, cfg.capset_id,
        cfg.capture_budget ? cfg.capture_budget : CaptureBudget::process(cfg.capture_max_bytes));
    if (CaptureWriter *w = c->capture_.get())
      c->decoder_.set_observer([w](uint32_t cmd, uint32_t seqno, std::span<const uint8_t> rsp) {
        w->response(cmd, seqno, rsp);
      });
  }
  *err = 0;
  return c;
}

ComputeContext::~ComputeContext() {
  close();
}

void ComputeContext::close() {
  // SPM workers first (they write responses into the shared page and post fences; sessions
  // released earlier may still be finishing on the reaper), then every completion-engine watch
  // (after remove() the engine never calls them), then fence delivery, so no callback runs once
  // the VMM believes we are gone. Then queues (their kernel contexts), mappings and objects,
  // every use of the guest's pages revoked; the device fd closes last, when the final object
  // holding it dies. Each step is a no-op the second time (the destructor after destroy).
  // Jobs that may reach guest pages the GPU VM mapped are waited for before the pages go back
  // (guest_page_release.cpp); taken first, while destroyed queues are still known.
  PageUsers reaching;
  if (memory_ && memory_->any_guest_pages_gpu_mapped()) reaching = guest_page_users();
  if (spm_callbacks_) spm_callbacks_->cut();
  for (uint32_t xcp = 0; xcp < spm_.size(); ++xcp)
    release_spm(xcp);
  if (engine_) {
    queues_.for_each([&](uint32_t, Queue &q) { unwatch_queue(q); });
    for (auto &d : draining_)
      engine_->remove(d.id);
    if (health_timer_) engine_->remove(health_timer_);
    health_timer_ = 0;
  }
  if (delivery_) delivery_->stop();
  // The health owner lets go of each queue too, so its kernel context goes before the mappings
  // its work used, not when the health owner itself is destroyed.
  if (health_) queues_.for_each([&](uint32_t handle, Queue &) { health_->remove(handle); });
  // Before the kernel contexts go, so their frees wait for nothing.
  wait_for_guest_page_users(reaching);
  // Only now, with nothing of the engine's left on this file: freeing a destroyed queue's kernel
  // context waits for its queued jobs under the file's context lock (amdgpu_ctx_free()), which
  // a health look on the engine's thread would wait for too, and every context with it.
  draining_.clear();
  queues_.clear();
  memory_.reset();  // unmaps everything and revokes every use of the guest's pages
}

int ComputeContext::submit_cmd(std::span<const uint8_t> cmds) {
  ShmemView &view = shmem_ ? shmem_->view() : no_shmem_;
  // A buffer the decoder refuses unread is not copied to disk either: the guest could otherwise
  // fill the host's disk past the submit limit.
  if (capture_) capture_->submit(cmds.size() > limits_.max_submit_bytes ? cmds.first(0) : cmds);
  const int r = decoder_.run(cmds, view).error;
  memory_->settle_bo_list();
  if (capture_) capture_->done(r);
  return r;
}

// ---- fences ----

int ComputeContext::create_fence(uint32_t ring_idx, uint64_t fence_id, bool mergeable) {
  if (ring_idx >= RVGL_RING_COUNT) return -EINVAL;
  // Each fence is host memory until the VMM has it; a virtio VMM's queue bounds them, a vtest
  // client (or a VMM that does not poll) nothing.
  if (delivery_->held() >= kMaxWaitingFences) return -ENOSPC;
  collect_drained();
  std::shared_ptr<const FenceSource> src;
  uint64_t point = 0;
  Queue *waits_on = nullptr;  // the kernel queue whose timeline the fence waits on
  if (rings_[ring_idx] == RingUse::kQueue) {
    Queue *q = queues_.get(ring_queue_[ring_idx]);
    if (q && q->kernel && q->kernel->last_submitted()) {
      src = q->kernel->timeline();
      point = q->kernel->last_submitted();
      waits_on = q;
      // Work the GPU already finished (its user fence, a memory read: the job ran to its end)
      // is made known here, so the fence retires now rather than at the engine's wakeup, and
      // the health owner looks after it (QueueWatch::reached_here).
      // Not where the kernel wakes the VMM's thread itself for the point (poll mode with
      // delegated points): there it would only add a second wake (poll() takes it then).
      if (q->watch && !delegates_points() && q->kernel->timeline()->known_reached() < point &&
          q->kernel->finished(point))
        q->watch->reached_here(point, monotonic_ns(), {.ran_to_end = true});
    }
  } else if (ring_idx == RVGL_RING_EVENTS) {
    // Retires at once while the guest has unread records, else with the next record. The ring
    // lives as long as the context, which outlives every pending fence: an aliasing pointer.
    if (const uint64_t next = events_.fence_point()) {
      src = std::shared_ptr<const FenceSource>(std::shared_ptr<void>(), &events_);
      point = next;
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
  const uint64_t position = delivery_->add(ring_idx, fence_id, std::move(src), point, mergeable);
  // Out of memory with the ring's last place taken by a fence of another timeline (add()).
  if (!position) return -ENOMEM;
  if (waits_on) waits_on->last_fence = position;
  return 0;
}

void ComputeContext::poll() {
  // Nested in one of its own callbacks: the outer poll delivers the rest and registers again
  // (fired_ is its list), and the poll fd stays readable for whatever it leaves.
  if (delivery_->in_callback_here()) return;
  // What woke the VMM's thread is delivered before the poll fd is drained: the drain is a system
  // call, and a completion that signals the fd between the first look and the drain is found by
  // the second look, which only runs when the drain consumed a wakeup.
  if (deliver_polled() && delivery_->drain_poll_fd()) deliver_polled();
}

bool ComputeContext::deliver_polled() {
  fired_.clear();
  if (delegates_points()) {
    const int64_t now = monotonic_ns();
    queues_.for_each([&](uint32_t, Queue &q) {
      if (q.watch) report_delegated(*q.watch, q.watch_id, now);
    });
    for (auto &d : draining_)
      report_delegated(*d.watch, d.id, now);
  }
  delivery_->poll();
  if (delivery_->stopped()) return false;  // closed by one of the callbacks: its watches are gone
  // Registered again only after the callbacks: the registration is an ioctl, and a point reached
  // meanwhile signals the fd as soon as it is registered.
  for (const Fired &f : fired_)
    engine_->delegated_fired(f.id, f.point, f.handled);
  return true;
}

void ComputeContext::report_delegated(QueueWatch &w, uint64_t id, int64_t now) {
  const uint64_t armed = engine_->delegated_point(id);
  // Not submitted yet (an idle ring's next point): it cannot have fired, and no query is spent.
  if (!armed || armed > w.queue().last_submitted()) return;
  // The user fence answers for a job that ran to its end without an ioctl; a failed job's
  // point is asked of the timeline.
  uint64_t reached = w.queue().finished_point();
  bool signalled = false;  // `reached` is what the kernel signalled, not only the user fence
  if (reached < armed) {
    if (w.queue().timeline()->query(&reached)) {
      // Whether the point was reached is unknown, and its registration may be spent: the
      // engine watches it again with its own eventfd.
      engine_->delegated_lost(id);
      return;
    }
    signalled = true;
  }
  if (reached < armed) return;
  if (w.reached_here(reached, now, {.ran_to_end = !signalled, .signalled = signalled})) {
    fired_.push_back({id, reached, true});
    return;
  }
  // A check is due. It must not look before the kernel's interrupt handler has recorded the
  // faults of the jobs it classifies, which the user fence page does not show (the GPU writes it
  // first): only a point the kernel signalled goes on.
  if (!signalled) {
    uint64_t kernel = 0;
    if (w.queue().timeline()->query(&kernel)) {
      engine_->delegated_lost(id);
      return;
    }
    if (kernel < armed) return;  // the kernel's registration for `armed` is still outstanding
    // Every job up to the user fence's point ran to its end: the fences go now and the check
    // follows on the engine, with no hop there and back on the way (QueueHealth::completed_later).
    reached = std::min(reached, kernel);
    if (w.reached_here(reached, now, {.ran_to_end = true, .signalled = true})) {
      fired_.push_back({id, reached, true});
      return;
    }
  }
  // A failed job (or a check under way): the engine classifies first, then delivers through the
  // poll fd.
  fired_.push_back({id, reached, false});
}

void ComputeContext::unwatch_queue(Queue &q) {
  if (!q.watch) return;
  engine_->remove(q.watch_id);
  q.watch.reset();
  q.watch_id = 0;
}

bool ComputeContext::drained(const DrainingWatch &d) const {
  return delivery_->taken_through(d.ring, d.fences) && d.watch->queue().idle();
}

void ComputeContext::collect_drained() {
  for (size_t i = 0; i < draining_.size();) {
    if (!drained(draining_[i])) {
      ++i;
      continue;
    }
    engine_->remove(draining_[i].id);
    draining_.erase(draining_.begin() + static_cast<std::ptrdiff_t>(i));
  }
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
  // The context takes the page only once all of it is done: one half made (out of memory in
  // the resource table, say) would leave a page the guest never got, refusing the next try.
  int err;
  auto page = SharedPage::create(&err);
  if (!page) return err;
  out->fd = page->dup_fd();
  if (!out->fd) return -EMFILE;
  out->fd_type = kFdTypeShm;
  out->map_info = kMapCached;
  out->size = RVGL_SHMEM_SIZE;
  if (int e = memory_->add_shared_page(args.res_id)) return e;
  shmem_ = std::move(page);
  // The page lives as long as the context: the ring may write into it from now on.
  if (facts_.capset.features & RVGL_FEATURE_EVENT_RING) events_.attach(shmem_->view());
  shmem_published_.store(shmem_.get(), std::memory_order_release);
  return 0;
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
  events_.post(type, queue, p0, p1);
  events_.notify();
}

ContextStats ComputeContext::stats() const {
  ContextStats s;
  static_cast<MemoryStats &>(s) = memory_->stats();
  s.queues = queues_.size();
  return s;
}

}  // namespace rvgl
