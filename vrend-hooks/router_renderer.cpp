// Renderer-wide calls: init / cleanup / reset, polling, capsets.
#include <cstring>

#include "init_flags.h"
#include "log.h"
#include "process_limits.h"
#include "real_library.h"
#include "router.h"

namespace rvgl::hooks {

namespace {

// Set while the real virgl_renderer_init runs on this thread: 0.10.4 calls
// virgl_renderer_cleanup (through its PLT, so through us) when it fails half way, and that call
// must reach the real library alone, not tear down our state.
thread_local bool t_in_real_init = false;

// The real library's write_fence: global fences wait for our work before the VMM sees them.
void real_write_fence(void *cookie, uint32_t fence) {
  try {
    Router::get().global_fences().real_signalled(cookie, fence);
  } catch (...) {
    log_warn("write_fence %u: failure while delivering", fence);
  }
}

// What a VMM without context fences gets, said once per init when RVGL_DEBUG=1 (issue 15,
// point 6).
void say_callbacks_version(int version, bool has_context_fences) {
  // QEMU 10.0 with an EGL display passes version 4 without write_context_fence: the same case.
  if (!debug_enabled() || version < 1 || has_context_fences) return;
  log_vmm(kVirglLogLevelWarning,
          "the VMM passed virgl_renderer_callbacks version %d without write_context_fence, so "
          "ROCM ring fences cannot be tracked per ring; every guest fence is global and is held "
          "until all ROCM work submitted before it is done (correct, but each fence waits for "
          "every queue and, without VIRGL_RENDERER_ASYNC_FENCE_CB, for the VMM's poll timer). "
          "Use a VMM that passes version 3 or later (QEMU 10.1+ with context_init=on, crosvm "
          "built with virgl_renderer_next) and a guest kernel with context init",
          version);
}

}  // namespace

Router &Router::get_slow() {
  static Router *r = new Router();
  return *r;
}

Router *Router::instance_ = &Router::get_slow();

std::shared_ptr<const Config> Router::config() {
  std::lock_guard lk(mu_);
  if (!cfg_) cfg_ = std::make_shared<const Config>(Config::from_env());
  return cfg_;
}

int Router::init(void *cookie, int flags, virgl_renderer_callbacks *cbs) {
  const virgl_renderer_callbacks *pass_cbs = cbs;
  int pass_flags = 0;
  bool fresh = false;
  uint32_t refused_capset = 0;
  {
    std::lock_guard lk(mu_);
    if (initialized_) {
      // The real library accepts a repeated init with identical arguments only: the same cookie,
      // flags and callbacks structure (virgl_renderer_init(): state.cbs != cbs is -EBUSY).
      if (cookie != vmm_.cookie() || flags != vmm_.flags() || cbs != vmm_.given()) return -EBUSY;
    } else {
      // A fresh start reads the environment again (a test may have changed it since cleanup).
      fresh = true;
      refresh_debug_from_env();
      cfg_ = std::make_shared<const Config>(Config::from_env());
      max_contexts_ = max_contexts_from_env();
      capsets_.clear();
      if (reserved_capset(cfg_->capset_id))
        refused_capset = cfg_->capset_id;  // said below, outside mu_ (the VMM's log callback)
      else
        set_vmm_locked(VmmCallbacks(cookie, flags, cbs));
    }
    if (!refused_capset) {
      pass_flags = real_init_flags(flags, cfg_->compute_only, cfg_->capset_id);
      if (const auto *c = vmm_.for_real_library(&real_write_fence, cfg_->compute_only))
        pass_cbs = c;
      wrap_global_fences_ = pass_cbs != cbs;
    }
  }
  if (refused_capset) {
    // Refused before the real library starts: the VMM stops with our message rather than
    // running with the guest kernel's own context taken over (issue 15, point 2).
    log_vmm(kVirglLogLevelWarning,
            "RVGL_CAPSET_ID=%u refused: capsets 1 (VIRGL) and 2 (VIRGL2) belong to the real "
            "library's virgl contexts, which the guest kernel and Mesa's virgl driver create "
            "without a capset; map ROCM onto 8 (default), 4 (venus) or 6 (drm) instead",
            refused_capset);
    return -EINVAL;
  }
  if (fresh) {
    global_.start(vmm_.cookie(), vmm_.write_fence(), vmm_.async_fences());
    if (!wrap_global_fences_ && cbs)
      log_warn(
          "virgl_renderer_callbacks version %d is unknown to us: global fences are not held "
          "for ROCM work",
          cbs->version);
    if (cbs) say_callbacks_version(cbs->version, vmm_.write_context_fence() != nullptr);
  }

  int ret = 0;
  if (auto real = RVGL_REAL(virgl_renderer_init)) {
    t_in_real_init = true;
    ret = real(cookie, pass_flags, const_cast<virgl_renderer_callbacks *>(pass_cbs));
    t_in_real_init = false;
  } else if (!cbs || cbs->version < 1) {
    ret = -1;  // what the real library answers; without it we serve ROCM contexts alone
  } else {
    log_warn("no real libvirglrenderer found: serving capset ROCM only");
  }

  std::lock_guard lk(mu_);
  if (ret == 0) {
    initialized_ = true;
  } else if (!initialized_) {
    set_vmm_locked(VmmCallbacks());
    wrap_global_fences_ = false;
  }
  return ret;
}

void Router::drop_everything() {
  std::map<uint32_t, std::shared_ptr<ComputeContext>> contexts;
  std::map<uint32_t, RocmResource> resources;
  {
    std::lock_guard lk(mu_);
    for (auto &[id, c] : contexts_)
      if (id < kFastSlots) fast_[id].store(nullptr, std::memory_order_release);
    contexts.swap(contexts_);
    resources.swap(resources_);
    real_.clear();
  }
  // Contexts first: their engine watches and SPM workers stop before anything they use goes away.
  // Closed, not only dropped: a poll in progress on this thread (the VMM resetting from inside
  // write_context_fence) holds a reference until it returns, and every use of the guest's pages
  // must end before this call does, as in context_destroy.
  for (auto &[id, c] : contexts)
    c->close();
  contexts.clear();
  resources.clear();
}

void Router::cleanup(void *cookie) {
  if (t_in_real_init) {
    if (auto real = RVGL_REAL(virgl_renderer_cleanup)) real(cookie);
    return;
  }
  drop_everything();
  global_.stop();
  if (auto real = RVGL_REAL(virgl_renderer_cleanup)) real(cookie);
  std::lock_guard lk(mu_);
  initialized_ = false;
  wrap_global_fences_ = false;
  set_vmm_locked(VmmCallbacks());
  // The configuration was this renderer's: until the next init, the environment says again
  // which capset is ours (a capset query between two renderers must not answer for the old id).
  cfg_.reset();
}

void Router::reset() {
  drop_everything();
  // The VMM forgets its pending fences with the reset (QEMU's virtio_gpu_virgl_reset); so do we,
  // and the renderer goes on with the same callbacks.
  void *cookie;
  WriteFenceFn write;
  bool async;
  {
    std::lock_guard lk(mu_);
    cookie = vmm_.cookie();
    write = vmm_.write_fence();
    async = vmm_.async_fences();
  }
  global_.start(cookie, write, async);
  if (auto real = RVGL_REAL(virgl_renderer_reset)) real();
}

void Router::poll() {
  if (auto real = RVGL_REAL(virgl_renderer_poll)) real();
  // Like the real library's poll of its non-virgl contexts. A context destroyed by a fence
  // callback on this thread stays alive until its poll returns, and is not polled after.
  for_each_context([this](const std::shared_ptr<ComputeContext> &c) {
    if (our_context(c->ctx_id()) == c) c->poll();
  });
  // The VMM's timer (QEMU: every 10 ms while fences are pending) is where held global fences
  // go out in poll mode.
  global_.check();
}

uint32_t Router::our_capset() {
  const uint32_t id = config()->capset_id;
  return reserved_capset(id) ? 0 : id;
}

int Router::create_fence(int client_fence_id, uint32_t ctx_id) {
  auto real = RVGL_REAL(virgl_renderer_create_fence);
  bool wrapping, compute_only;
  {
    std::lock_guard lk(mu_);
    wrapping = wrap_global_fences_;
    compute_only = cfg_ && cfg_->compute_only;
  }
  // ctx0 fences belong to vrend whatever ctx_id says (the real library ignores it).
  if (!wrapping) return real ? real(client_fence_id, ctx_id) : EINVAL;

  // Our part: every kernel queue of every ROCM context, as of now.
  const auto ours = all_contexts();
  std::vector<WorkSnapshot> work;
  work.reserve(ours.size());
  for (const auto &c : ours)
    work.push_back(c->work_snapshot());
  const uint32_t id = static_cast<uint32_t>(client_fence_id);
  global_.add(id, std::move(work));
  const int ret = real ? real(client_fence_id, ctx_id) : EINVAL;
  if (ret == 0) return 0;
  // The real library has no renderer for ctx0 fences (NO_VIRGL, compute-only mode, no real
  // library): where our contexts are in play the fence is ours alone, else its answer stands.
  const bool ours_alone = !real || compute_only || !ours.empty();
  global_.real_refused(id, ours_alone);
  return ours_alone ? 0 : ret;
}

void Router::get_cap_set(uint32_t set, uint32_t *max_ver, uint32_t *max_size) {
  const auto cfg = config();
  if (set != our_capset()) {
    if (auto real = RVGL_REAL(virgl_renderer_get_cap_set)) return real(set, max_ver, max_size);
    if (max_ver) *max_ver = 0;
    if (max_size) *max_size = 0;
    return;
  }
  if (!max_ver || !max_size) return;
  const auto caps = capsets_.get(*cfg);
  *max_ver = caps ? RVGL_CAPSET_VERSION : 0;
  *max_size = caps ? sizeof(rvgl_capset) : 0;
}

void Router::fill_caps(uint32_t set, uint32_t version, void *caps) {
  const auto cfg = config();
  if (set != our_capset()) {
    if (auto real = RVGL_REAL(virgl_renderer_fill_caps)) real(set, version, caps);
    return;
  }
  if (!caps || version > RVGL_CAPSET_VERSION) return;
  if (const auto c = capsets_.get(*cfg)) std::memcpy(caps, &*c, sizeof(*c));
}

size_t Router::context_count() {
  std::lock_guard lk(mu_);
  return contexts_.size();
}

size_t Router::resource_count() {
  std::lock_guard lk(mu_);
  return resources_.size();
}

}  // namespace rvgl::hooks
