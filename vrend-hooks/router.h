// Decides, call by call, whether a virglrenderer API call is ours (a ROCM context, one of its
// resources, the ROCM capset) or the real library's, and keeps the state that decision needs.
//
// Threads (DESIGN.md D9, docs/threads.md): the VMM calls from one thread at a time; the
// completion engine and SPM workers call the VMM's write_context_fence directly and never touch
// this state; the real library's write_fence may arrive on its sync thread (ASYNC_FENCE_CB) and
// goes to global_ (its own lock).
// mu_ guards the tables only: it is never held while calling the real library (0.10.4 calls some
// of its own exported functions, which come back through us), a VMM callback, or a context's
// destructor (which waits out the completion engine's calls into it).
//
// The submit path finds a context without the lock (issue 13, point 7): fast_ holds a raw pointer
// per small context id, set and cleared under mu_ while the table's shared_ptr keeps the context
// alive. Reading it without a reference is safe for the same reason the real library's unlocked
// context lookup is: a VMM never destroys a context while it submits to it (its calls are
// serialised), and only VMM calls destroy contexts.
#pragma once

#include <array>
#include <cerrno>
#include <climits>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "capset_cache.h"
#include "context/compute_context.h"
#include "context/config.h"
#include "global_fences.h"
#include "real_ids.h"
#include "rocm_resource.h"
#include "virgl_api.h"
#include "vmm_callbacks.h"

namespace rvgl::hooks {

class Router {
 public:
  static constexpr uint32_t kFastSlots = 1024;

  // The process-wide instance. Never destroyed: a VMM may call us from its own exit path. Made
  // when the library loads, so the API path reads one pointer (a call before that, from another
  // library's constructor, makes it then).
  static Router &get() {
    Router *r = instance_;
    return r ? *r : get_slow();
  }

  // ---- renderer (router_renderer.cpp) ----
  int init(void *cookie, int flags, virgl_renderer_callbacks *cbs);
  void cleanup(void *cookie);
  void reset();
  void poll();
  void get_cap_set(uint32_t set, uint32_t *max_ver, uint32_t *max_size);
  void fill_caps(uint32_t set, uint32_t version, void *caps);
  // virgl_renderer_create_fence: the real library's, held for our work (GlobalFences).
  int create_fence(int client_fence_id, uint32_t ctx_id);
  GlobalFences &global_fences() { return global_; }

  // ---- contexts (router_contexts.cpp) ----
  int context_create(uint32_t ctx_id, uint32_t ctx_flags, uint32_t nlen, const char *name);
  // virgl_renderer_context_create: a legacy (no capset) context, always the real library's.
  int legacy_context_create(uint32_t ctx_id, uint32_t nlen, const char *name);
  void context_destroy(uint32_t ctx_id);
  // The hot path (issue 13, point 7): inline, no lock, no reference count, no map lookup for
  // small ids; everything else goes out of line.
  int submit_cmd(void *buffer, int ctx_id, int ndw) {
    const uint32_t id = static_cast<uint32_t>(ctx_id);
    if (id < kFastSlots) {
      if (ComputeContext *c = fast_[id].load(std::memory_order_acquire))
        return submit_to(c, buffer, ndw);
    }
    return submit_cmd_slow(buffer, ctx_id, ndw);
  }
  int submit_cmd2(void *buffer, int ctx_id, int ndw, uint64_t *in_fence_ids,
                  uint32_t num_in_fences);
  int context_create_fence(uint32_t ctx_id, uint32_t flags, uint32_t ring_idx, uint64_t fence_id);
  void context_poll(uint32_t ctx_id);
  int context_get_poll_fd(uint32_t ctx_id);
  void ctx_attach_resource(uint32_t ctx_id, uint32_t res_id);
  void ctx_detach_resource(uint32_t ctx_id, uint32_t res_id);

  // ---- resources (router_resources.cpp) ----
  int resource_create_blob(const virgl_renderer_resource_create_blob_args *args);
  // Creation by the real library (resource_create, import_blob, ...): refused with `refusal` when
  // the id is ours, else `create` runs and a 0 result records the id as the real library's.
  template <class Create>
  int real_resource_create(uint32_t res_id, int refusal, Create &&create);
  void resource_unref(uint32_t res_id);
  // Ours: every context lets go of the blob's guest pages, then the VMM gets its iovecs back
  // (it unmaps them when this returns); true. Not ours: false.
  bool resource_detach_iov(uint32_t res_id, iovec **iov_p, int *num_iovs_p);
  // Every context of ours detaches res_id (revoking its use of the guest's pages, if any).
  void detach_from_all_contexts(uint32_t res_id);
  // Runs f(RocmResource&) under the table lock when res_id is ours; false otherwise.
  template <class F>
  bool with_resource(uint32_t res_id, F &&f);
  bool owns_resource(uint32_t res_id);
  bool owns_context(uint32_t ctx_id);

  // For tests: our live contexts and resources.
  size_t context_count();
  size_t resource_count();

 private:
  Router() = default;
  static Router &get_slow();
  static Router *instance_;
  // Records an id the real library has just made as its own. Out of memory, unrecorded, the id
  // would pass for free and could become ours while the real library still holds it: the
  // real library's object goes again, and bad_alloc goes on to the guard (ENOMEM).
  void note_real_resource(uint32_t res_id);
  void note_real_context(uint32_t ctx_id);
  std::shared_ptr<const Config> config();
  std::shared_ptr<ComputeContext> our_context(uint32_t ctx_id);
  // The context without taking a reference or the lock where the id is small (see above).
  ComputeContext *fast_context(uint32_t ctx_id);
  int submit_cmd_slow(void *buffer, int ctx_id, int ndw);
  // The real library's checks on the buffer (positive errno), then the context's decoder.
  static int submit_to(ComputeContext *c, void *buffer, int ndw) {
    // ndw < 0 wraps to a huge unsigned count and fails the size check.
    const uint32_t n = static_cast<uint32_t>(ndw);
    if (n > UINT32_MAX / sizeof(uint32_t) || (n && !buffer)) return EINVAL;
    return c->submit_cmd({static_cast<const uint8_t *>(buffer), size_t{n} * sizeof(uint32_t)});
  }
  // The capset id we serve: the configured one, or 0 (none) when it is reserved.
  uint32_t our_capset();
  std::vector<std::shared_ptr<ComputeContext>> all_contexts();
  // Calls f(context) for each context of ours, one at a time and outside the lock, allocating
  // nothing: a detach or an unref must revoke every use of the pages whatever the memory.
  // Contexts created meanwhile with a higher id are visited too; destroyed ones may still be.
  template <class F>
  void for_each_context(F &&f) {
    for (uint32_t from = 0;;) {
      uint32_t id = 0;
      const std::shared_ptr<ComputeContext> c = context_from(from, &id);
      if (!c) return;
      f(c);
      if (id == UINT32_MAX) return;
      from = id + 1;
    }
  }
  // The context of ours with the lowest id at or above `from` (its id in *id), or null.
  std::shared_ptr<ComputeContext> context_from(uint32_t from, uint32_t *id);
  int create_our_context(uint32_t ctx_id);
  // Everything of ours goes: contexts (outside the lock), then resources.
  void drop_everything();

  std::mutex mu_;
  std::shared_ptr<const Config> cfg_;
  uint32_t max_contexts_ = 0;
  bool wrap_global_fences_ = false;  // the real library's write_fence comes to global_
  CapsetCache capsets_;
  VmmCallbacks vmm_;
  // Whether vmm_ has write_context_fence, for create_fence without the lock (written under mu_).
  std::atomic<bool> context_fences_{false};
  void set_vmm_locked(VmmCallbacks v) {
    vmm_ = v;
    context_fences_.store(vmm_.write_context_fence() != nullptr, std::memory_order_release);
  }
  bool initialized_ = false;
  RealIds real_;
  std::map<uint32_t, std::shared_ptr<ComputeContext>> contexts_;
  std::map<uint32_t, RocmResource> resources_;
  std::array<std::atomic<ComputeContext *>, kFastSlots> fast_{};
  GlobalFences global_;
};

template <class Create>
int Router::real_resource_create(uint32_t res_id, int refusal, Create &&create) {
  if (owns_resource(res_id)) return refusal;
  const int ret = create();
  if (ret == 0) note_real_resource(res_id);
  return ret;
}

template <class F>
bool Router::with_resource(uint32_t res_id, F &&f) {
  std::lock_guard lk(mu_);
  auto it = resources_.find(res_id);
  if (it == resources_.end()) return false;
  f(it->second);
  return true;
}

}  // namespace rvgl::hooks
