// Contexts: creation by capset id, command submission, fences, resource attachment.
#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

#include <new>
#include <system_error>

#include "init_flags.h"
#include "log.h"
#include "memory/usage.h"
#include "process_limits.h"
#include "real_library.h"
#include "router.h"

namespace rvgl::hooks {

std::shared_ptr<ComputeContext> Router::our_context(uint32_t ctx_id) {
  std::lock_guard lk(mu_);
  auto it = contexts_.find(ctx_id);
  return it == contexts_.end() ? nullptr : it->second;
}

ComputeContext *Router::fast_context(uint32_t ctx_id) {
  if (ctx_id < kFastSlots) return fast_[ctx_id].load(std::memory_order_acquire);
  std::lock_guard lk(mu_);
  auto it = contexts_.find(ctx_id);
  return it == contexts_.end() ? nullptr : it->second.get();
}

std::vector<std::shared_ptr<ComputeContext>> Router::all_contexts() {
  std::lock_guard lk(mu_);
  std::vector<std::shared_ptr<ComputeContext>> v;
  v.reserve(contexts_.size());
  for (auto &[id, c] : contexts_)
    v.push_back(c);
  return v;
}

std::shared_ptr<ComputeContext> Router::context_from(uint32_t from, uint32_t *id) {
  std::lock_guard lk(mu_);
  auto it = contexts_.lower_bound(from);
  if (it == contexts_.end()) return nullptr;
  *id = it->first;
  return it->second;
}

bool Router::owns_context(uint32_t ctx_id) {
  return fast_context(ctx_id) != nullptr;
}

int Router::context_create(uint32_t ctx_id, uint32_t ctx_flags, uint32_t nlen, const char *name) {
  // The real library's checks and answers (positive errno), made before any routing so that both
  // paths refuse the same input alike.
  if (ctx_id == 0) return EINVAL;
  if (ctx_flags & ~uint32_t{VIRGL_RENDERER_CONTEXT_FLAG_CAPSET_ID_MASK}) return EINVAL;
  const uint32_t capset = ctx_flags & VIRGL_RENDERER_CONTEXT_FLAG_CAPSET_ID_MASK;
  if (capset != 0 && capset == our_capset()) return create_our_context(ctx_id);

  // An id of ours with another capset: the real library would answer EINVAL for its own.
  if (owns_context(ctx_id)) return EINVAL;
  auto real = RVGL_REAL(virgl_renderer_context_create_with_flags);
  if (!real) return EINVAL;  // no real library: no other context type exists
  const int ret = real(ctx_id, ctx_flags, nlen, name);
  if (ret == 0) note_real_context(ctx_id);
  return ret;
}

int Router::legacy_context_create(uint32_t ctx_id, uint32_t nlen, const char *name) {
  // Always the real library's (issue 15, point 2): a context without a capset is virgl's, like
  // the one the guest kernel creates for its console.
  if (owns_context(ctx_id)) return EINVAL;
  int ret;
  if (auto real = RVGL_REAL(virgl_renderer_context_create)) {
    ret = real(ctx_id, nlen, name);
  } else {
    return EINVAL;  // no real library: no legacy context type exists
  }
  if (ret == 0) note_real_context(ctx_id);
  return ret;
}

void Router::note_real_context(uint32_t ctx_id) {
  try {
    std::lock_guard lk(mu_);
    real_.add_context(ctx_id);
  } catch (const std::bad_alloc &) {
    if (auto real = RVGL_REAL(virgl_renderer_context_destroy)) real(ctx_id);
    throw;
  }
}

int Router::create_our_context(uint32_t ctx_id) {
  std::shared_ptr<const Config> cfg;
  VmmCallbacks vmm;
  {
    std::lock_guard lk(mu_);
    if (!initialized_) return EINVAL;
    if (contexts_.count(ctx_id)) return 0;  // same id, same capset: the real library's answer
    if (real_.has_context(ctx_id)) return EINVAL;
    // Per-process limits (issue 13, point 6): refused with a message; the VMM and every other
    // context go on.
    // A destroyed context counts while a resource of the VMM holds memory it exported (its
    // quota account lives on with the charge): host memory stays within contexts x quota.
    const uint64_t accounts = std::max<uint64_t>(contexts_.size(), Usage::alive());
    if (accounts >= max_contexts_) {
      static LogLimit limit;
      log_warn_limited(limit,
                       "ctx %u refused: %zu ROCM contexts alive and %llu destroyed ones whose "
                       "exported memory the VMM still holds, the limit of this VMM process "
                       "(RVGL_MAX_CONTEXTS=%u)",
                       ctx_id, contexts_.size(),
                       static_cast<unsigned long long>(accounts - contexts_.size()), max_contexts_);
      return ENOSPC;
    }
    cfg = cfg_;
    vmm = vmm_;
  }
  const int free = free_fds();
  if (free >= 0 && free < fd_reserve()) {
    static LogLimit limit;
    log_warn_limited(
        limit,
        "ctx %u refused: only %d file descriptors left to this VMM process (RLIMIT_NOFILE); "
        "%d stay reserved for the VMM",
        ctx_id, free, fd_reserve());
    return EMFILE;
  }

  // DESIGN.md D2: the VMM's get_drm_fd chooses the node when it gives one; a node that is not
  // amdgpu (the VMM's display GPU) falls back to the configured / first amdgpu node.
  UniqueFd vmm_fd(vmm.get_drm_fd());
  const bool had_vmm_fd = vmm_fd.valid();
  auto make = [&](UniqueFd fd, int *err) {
    ComputeContext::Options o;
    o.ctx_id = ctx_id;
    o.config = cfg.get();
    o.drm_fd = std::move(fd);
    o.async_fences = vmm.async_fences();
    o.descriptor_left = descriptor_left_for_us;
    // Captured by value: the completion engine, which calls it, never reads the router.
    o.on_fence = [write = vmm.write_context_fence(), cookie = vmm.cookie(), ctx_id](
                     uint32_t ring_idx, uint64_t fence_id) {
      if (write) write(cookie, ctx_id, ring_idx, fence_id);
    };
    return ComputeContext::create(std::move(o), err);
  };
  int err = 0;
  std::unique_ptr<ComputeContext> ctx;
  // Exhaustion inside the context (the completion engine's thread, which the first context
  // starts; memory) is an error for this context only.
  auto make_guarded = [&](UniqueFd fd) {
    try {
      ctx = make(std::move(fd), &err);
    } catch (const std::system_error &e) {
      static LogLimit limit;
      log_warn_limited(limit, "ctx %u: %s", ctx_id, e.what());
      err = e.code().value() > 0 ? -e.code().value() : -EAGAIN;
    } catch (const std::bad_alloc &) {
      err = -ENOMEM;
    }
  };
  make_guarded(std::move(vmm_fd));
  if (!ctx && had_vmm_fd && err == -ENODEV) {
    log_debug("ctx %u: the VMM's drm fd is not an amdgpu node; using the configured one", ctx_id);
    make_guarded(UniqueFd());
  }
  if (!ctx) {
    static LogLimit limit;
    log_warn_limited(limit, "ctx %u: cannot create a ROCM context (%s)", ctx_id, strerror(-err));
    return err < 0 ? -err : EINVAL;
  }
  // The context refers to the config: keep it alive as long as the context is.
  std::shared_ptr<ComputeContext> shared(ctx.release(), [cfg](ComputeContext *c) { delete c; });

  std::lock_guard lk(mu_);
  if (contexts_.count(ctx_id) || real_.has_context(ctx_id)) return EINVAL;
  ComputeContext *raw = shared.get();
  contexts_.emplace(ctx_id, std::move(shared));
  if (ctx_id < kFastSlots) fast_[ctx_id].store(raw, std::memory_order_release);
  return 0;
}

void Router::context_destroy(uint32_t ctx_id) {
  std::shared_ptr<ComputeContext> doomed;
  {
    std::lock_guard lk(mu_);
    auto it = contexts_.find(ctx_id);
    if (it != contexts_.end()) {
      if (ctx_id < kFastSlots) fast_[ctx_id].store(nullptr, std::memory_order_release);
      doomed = std::move(it->second);
      contexts_.erase(it);
    }
  }
  if (doomed) {
    // Closed before the last reference goes: a poll of this context in progress on this thread
    // (the VMM destroying it from write_context_fence) holds one until it returns, and the VMM
    // may take the guest's pages back as soon as this call returns.
    doomed->close();
    return;  // destroyed here, outside the lock (it waits out its engine callbacks)
  }
  if (auto real = RVGL_REAL(virgl_renderer_context_destroy)) real(ctx_id);
  std::lock_guard lk(mu_);
  real_.remove_context(ctx_id);
}

int Router::submit_cmd_slow(void *buffer, int ctx_id, int ndw) {
  // Ids past the slot array: ours are in the table.
  if (static_cast<uint32_t>(ctx_id) >= kFastSlots) {
    if (ComputeContext *c = fast_context(static_cast<uint32_t>(ctx_id)))
      return submit_to(c, buffer, ndw);
  }
  if (auto real = RVGL_REAL(virgl_renderer_submit_cmd)) return real(buffer, ctx_id, ndw);
  return EINVAL;
}

int Router::submit_cmd2(void *buffer, int ctx_id, int ndw, uint64_t *in_fence_ids,
                        uint32_t num_in_fences) {
  if (!owns_context(static_cast<uint32_t>(ctx_id))) {
    if (auto real = RVGL_REAL(virgl_renderer_submit_cmd2))
      return real(buffer, ctx_id, ndw, in_fence_ids, num_in_fences);
    return ENOSYS;
  }
  // 1.x's checks: a dword-aligned buffer; in-fences need fence sharing, which we do not offer.
  if (reinterpret_cast<uintptr_t>(buffer) & 3) return EFAULT;
  if (num_in_fences) return -EINVAL;
  return submit_to(fast_context(static_cast<uint32_t>(ctx_id)), buffer, ndw);
}

int Router::context_create_fence(uint32_t ctx_id, uint32_t flags, uint32_t ring_idx,
                                 uint64_t fence_id) {
  // Context fences are delivered through write_context_fence (callbacks version 3+). The real
  // library asserts on its absence (and would call null); we refuse, for every context type.
  if (!context_fences_.load(std::memory_order_acquire)) return -EINVAL;
  // The VMM's thread is the one that destroys contexts, so the pointer outlives this call (as in
  // submit_cmd).
  ComputeContext *c = fast_context(ctx_id);
  if (!c) {
    if (auto real = RVGL_REAL(virgl_renderer_context_create_fence))
      return real(ctx_id, flags, ring_idx, fence_id);
    return -EINVAL;
  }
  // MERGEABLE (the only flag) lets the completion engine observe the fence together with later
  // work on its ring, and report it together with a later fence of the ring that retires with it.
  return c->create_fence(ring_idx, fence_id, (flags & VIRGL_RENDERER_FENCE_FLAG_MERGEABLE) != 0);
}

void Router::context_poll(uint32_t ctx_id) {
  if (auto c = our_context(ctx_id)) {
    c->poll();
  } else if (auto real = RVGL_REAL(virgl_renderer_context_poll)) {
    real(ctx_id);
  }
  global_.check();  // cheap when nothing is held: a lock and an empty check
}

int Router::context_get_poll_fd(uint32_t ctx_id) {
  if (auto c = our_context(ctx_id)) {
    std::lock_guard lk(mu_);
    // With ASYNC_FENCE_CB fences arrive by callback and the fd never becomes readable.
    return vmm_.async_fences() ? -1 : c->poll_fd();
  }
  if (auto real = RVGL_REAL(virgl_renderer_context_get_poll_fd)) return real(ctx_id);
  return -1;
}

void Router::ctx_attach_resource(uint32_t ctx_id, uint32_t res_id) {
  auto c = our_context(ctx_id);
  if (!c) {
    // The real library does not know our resources (and would ignore them).
    if (owns_resource(res_id)) return;
    if (auto real = RVGL_REAL(virgl_renderer_ctx_attach_resource))
      real(static_cast<int>(ctx_id), static_cast<int>(res_id));
    return;
  }
  if (c->has_resource(res_id)) return;  // the creating context has it already

  // Anything else is imported as a dma-buf: another ROCM context's blob, or a resource of the
  // real library (DESIGN.md D1, cross-path sharing).
  UniqueFd fd;
  uint64_t size = 0;
  std::shared_ptr<const void> charge;
  int err = -EINVAL;
  const bool ours = with_resource(res_id, [&](RocmResource &r) {
    size = r.size();
    charge = r.charge();
    if (r.is_dmabuf()) err = r.dup_fd(&fd);
  });
  if (!ours) {
    auto real_export = RVGL_REAL(virgl_renderer_resource_export_blob);
    uint32_t fd_type = 0;
    int raw = -1;
    if (real_export && real_export(res_id, &fd_type, &raw) == 0 && raw >= 0) {
      fd.reset(raw);
      err = fd_type == VIRGL_RENDERER_BLOB_FD_TYPE_DMABUF ? 0 : -EINVAL;
      if (err) fd.reset();
    }
  }
  if (err == 0) err = c->attach_foreign(res_id, std::move(fd), size, std::move(charge));
  if (err) log_debug("ctx %u: resource %u not attached (%s)", ctx_id, res_id, strerror(-err));
}

void Router::ctx_detach_resource(uint32_t ctx_id, uint32_t res_id) {
  if (auto c = our_context(ctx_id)) return c->detach_resource(res_id);
  if (owns_resource(res_id)) return;
  if (auto real = RVGL_REAL(virgl_renderer_ctx_detach_resource))
    real(static_cast<int>(ctx_id), static_cast<int>(res_id));
}

}  // namespace rvgl::hooks
