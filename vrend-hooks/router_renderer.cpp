// Renderer-wide calls: init / cleanup / reset, polling, capsets.
#include <cstring>

#include "init_flags.h"
#include "log.h"
#include "real_library.h"
#include "router.h"

namespace rvgl::hooks {

namespace {

// Set while the real virgl_renderer_init runs on this thread: 0.10.4 calls
// virgl_renderer_cleanup (through its PLT, so through us) when it fails half way, and that call
// must reach the real library alone, not tear down our state.
thread_local bool t_in_real_init = false;

}  // namespace

Router &Router::get() {
  static Router *r = new Router();
  return *r;
}

std::shared_ptr<const Config> Router::config() {
  std::lock_guard lk(mu_);
  if (!cfg_) cfg_ = std::make_shared<const Config>(Config::from_env());
  return cfg_;
}

int Router::init(void *cookie, int flags, virgl_renderer_callbacks *cbs) {
  const virgl_renderer_callbacks *pass_cbs = cbs;
  int pass_flags;
  {
    std::lock_guard lk(mu_);
    if (initialized_) {
      // The real library accepts a repeated init with identical arguments only.
      if (cookie != vmm_.cookie() || flags != vmm_.flags()) return -EBUSY;
    } else {
      // A fresh start reads the environment again (a test may have changed it since cleanup).
      cfg_ = std::make_shared<const Config>(Config::from_env());
      capsets_.clear();
      vmm_ = VmmCallbacks(cookie, flags, cbs);
    }
    pass_flags = real_init_flags(flags, cfg_->compute_only);
    if (cfg_->compute_only) {
      // vmm_ is only rewritten by a fresh init, so this pointer stays what the real library saw.
      if (const auto *c = vmm_.without_egl_display()) pass_cbs = c;
    }
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
    vmm_ = VmmCallbacks();
  }
  return ret;
}

void Router::drop_everything() {
  std::map<uint32_t, std::shared_ptr<ComputeContext>> contexts;
  std::map<uint32_t, RocmResource> resources;
  {
    std::lock_guard lk(mu_);
    contexts.swap(contexts_);
    resources.swap(resources_);
    real_.clear();
  }
  // Contexts first: their retire threads stop before anything they use goes away.
  contexts.clear();
  resources.clear();
}

void Router::cleanup(void *cookie) {
  if (t_in_real_init) {
    if (auto real = RVGL_REAL(virgl_renderer_cleanup)) real(cookie);
    return;
  }
  drop_everything();
  if (auto real = RVGL_REAL(virgl_renderer_cleanup)) real(cookie);
  std::lock_guard lk(mu_);
  initialized_ = false;
  vmm_ = VmmCallbacks();
}

void Router::reset() {
  drop_everything();
  if (auto real = RVGL_REAL(virgl_renderer_reset)) real();
}

void Router::poll() {
  if (auto real = RVGL_REAL(virgl_renderer_poll)) real();
  // Like the real library's poll of its non-virgl contexts. A context destroyed by a fence
  // callback on this thread stays alive until its poll returns, and is not polled after.
  for (auto &c : all_contexts()) {
    if (our_context(c->ctx_id()) == c) c->poll();
  }
}

void Router::get_cap_set(uint32_t set, uint32_t *max_ver, uint32_t *max_size) {
  const auto cfg = config();
  if (set != cfg->capset_id) {
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
  if (set != cfg->capset_id) {
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
