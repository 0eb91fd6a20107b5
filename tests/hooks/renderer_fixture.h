// A VMM in miniature for in-process tests: initialises virglrenderer through whatever
// definitions the test executable resolves (ours in front of the real library), records the
// fences it is given, and cleans up. Only one may exist at a time (the real library is global).
#pragma once

#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "support/product_scope.h"
#include "virgl_api.h"

namespace rvgl::hooks_test {

struct ContextFence {
  uint32_t ctx_id;
  uint32_t ring_idx;
  uint64_t fence_id;
  std::thread::id thread;
  std::string thread_name;  // pthread_getname_np of the delivering thread
};

class FenceLog {
 public:
  void record(uint32_t ctx, uint32_t ring, uint64_t id) {
    char name[16] = {};
    pthread_getname_np(pthread_self(), name, sizeof(name));
    std::lock_guard lk(mu_);
    log_.push_back({ctx, ring, id, std::this_thread::get_id(), name});
    cv_.notify_all();
  }
  // Whether fence `id` of (ctx, ring) retired: as QEMU, crosvm and vtest read a context fence,
  // a later id of the ring retires it too (a MERGEABLE fence may be reported only through it).
  bool has(uint32_t ctx, uint32_t ring, uint64_t id) const {
    std::lock_guard lk(mu_);
    return retired_locked(ctx, ring, id);
  }
  std::vector<ContextFence> snapshot() const {
    std::lock_guard lk(mu_);
    return log_;
  }
  // Waits for a record from another thread (async delivery).
  bool wait(uint32_t ctx, uint32_t ring, uint64_t id, std::chrono::milliseconds timeout) {
    std::unique_lock lk(mu_);
    return cv_.wait_for(lk, timeout, [&] { return retired_locked(ctx, ring, id); });
  }

 private:
  bool retired_locked(uint32_t ctx, uint32_t ring, uint64_t id) const {
    for (const auto &f : log_)
      if (f.ctx_id == ctx && f.ring_idx == ring && f.fence_id >= id) return true;
    return false;
  }

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<ContextFence> log_;
};

// Sets an environment variable for the scope and restores the old value.
class ScopedEnv {
 public:
  ScopedEnv(const char *name, const char *value) : name_(name) {
    if (const char *old = std::getenv(name)) old_ = old, had_ = true;
    if (value)
      setenv(name, value, 1);
    else
      unsetenv(name);
  }
  ~ScopedEnv() {
    if (had_)
      setenv(name_.c_str(), old_.c_str(), 1);
    else
      unsetenv(name_.c_str());
  }
  ScopedEnv(const ScopedEnv &) = delete;
  ScopedEnv &operator=(const ScopedEnv &) = delete;

 private:
  std::string name_, old_;
  bool had_ = false;
};

class Renderer {
 public:
  struct Options {
    int flags = VIRGL_RENDERER_NO_VIRGL;
    int callbacks_version = 4;
    // get_drm_fd returns this node opened, or -1 when empty (as vtest does without --rendernode).
    std::string drm_node;
    // Version 4's get_egl_display, answering null (a VMM without an EGL display of its own).
    bool egl_display_callback = false;
  };

  explicit Renderer(const Options &o) : opts_(o) {
    cbs_.version = o.callbacks_version;
    // The callbacks are the VMM's code: an allocation sweep refuses none of theirs.
    cbs_.write_fence = [](void *cookie, uint32_t fence) {
      rvgl::test::TestCallback vmm;
      auto *self = static_cast<Renderer *>(cookie);
      std::lock_guard lk(self->ctx0_mu_);
      self->ctx0_fences_.push_back(fence);
    };
    cbs_.get_drm_fd = [](void *cookie) -> int {
      auto *self = static_cast<Renderer *>(cookie);
      if (self->opts_.drm_node.empty()) return -1;
      return ::open(self->opts_.drm_node.c_str(), O_RDWR | O_CLOEXEC);
    };
    if (o.callbacks_version >= 3) {
      cbs_.write_context_fence = [](void *cookie, uint32_t ctx, uint32_t ring, uint64_t id) {
        rvgl::test::TestCallback vmm;
        auto *self = static_cast<Renderer *>(cookie);
        self->fences_.record(ctx, ring, id);
        if (self->after_context_fence_) self->after_context_fence_(ctx, ring, id);
      };
    }
    if (o.egl_display_callback) cbs_.get_egl_display = [](void *) -> void * { return nullptr; };
    result_ = virgl_renderer_init(this, o.flags, &cbs_);
  }
  ~Renderer() { virgl_renderer_cleanup(this); }
  Renderer(const Renderer &) = delete;
  Renderer &operator=(const Renderer &) = delete;

  int result() const { return result_; }
  bool async() const { return opts_.flags & VIRGL_RENDERER_ASYNC_FENCE_CB; }
  // What the VMM does inside write_context_fence after recording it (set before fences flow).
  void after_context_fence(std::function<void(uint32_t ctx, uint32_t ring, uint64_t id)> f) {
    after_context_fence_ = std::move(f);
  }
  FenceLog &fences() { return fences_; }
  // Global fences written to the VMM (write_fence), in order. Recorded from whatever thread the
  // library calls on.
  std::vector<uint32_t> ctx0_fences() const {
    std::lock_guard lk(ctx0_mu_);
    return ctx0_fences_;
  }

  // Waits for a context fence the way the VMM would: the callback thread with ASYNC_FENCE_CB,
  // else poll(context_get_poll_fd) + context_poll on this thread (vtest's way).
  bool wait_context_fence(uint32_t ctx, uint32_t ring, uint64_t id,
                          std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    if (async()) return fences_.wait(ctx, ring, id, timeout);
    const auto end = std::chrono::steady_clock::now() + timeout;
    while (!fences_.has(ctx, ring, id)) {
      if (std::chrono::steady_clock::now() > end) return false;
      const int fd = virgl_renderer_context_get_poll_fd(ctx);
      if (fd >= 0) {
        pollfd p{fd, POLLIN, 0};
        ::poll(&p, 1, 20);
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
      virgl_renderer_context_poll(ctx);
    }
    return true;
  }

 private:
  Options opts_;
  virgl_renderer_callbacks cbs_{};
  int result_ = -1;
  FenceLog fences_;
  std::function<void(uint32_t, uint32_t, uint64_t)> after_context_fence_;
  mutable std::mutex ctx0_mu_;
  std::vector<uint32_t> ctx0_fences_;
};

// The real library's own definitions, bypassing ours: "without our library" in comparisons.
struct RealApi {
  void *handle = nullptr;
  decltype(&virgl_renderer_get_cap_set) get_cap_set = nullptr;
  decltype(&virgl_renderer_fill_caps) fill_caps = nullptr;
  decltype(&virgl_renderer_resource_get_map_info) get_map_info = nullptr;

  RealApi() {
    // dlsym on the library's own handle looks in that object first, never at ours.
    handle = dlopen("libvirglrenderer.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!handle) throw std::runtime_error("libvirglrenderer.so.1 is not loaded");
    get_cap_set =
        reinterpret_cast<decltype(get_cap_set)>(dlsym(handle, "virgl_renderer_get_cap_set"));
    fill_caps = reinterpret_cast<decltype(fill_caps)>(dlsym(handle, "virgl_renderer_fill_caps"));
    get_map_info = reinterpret_cast<decltype(get_map_info)>(
        dlsym(handle, "virgl_renderer_resource_get_map_info"));
  }
  ~RealApi() {
    if (handle) dlclose(handle);
  }
  RealApi(const RealApi &) = delete;
  RealApi &operator=(const RealApi &) = delete;
};

}  // namespace rvgl::hooks_test
