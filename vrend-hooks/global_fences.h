// Global (ctx0) fences — virgl_renderer_create_fence — held until our contexts' work is done.
//
// A VMM without context fences (callbacks version 1 or 2: QEMU up to 10.0, crosvm without
// virgl_renderer_next) turns every guest fence into a global one, and the guest kernel believes
// in one global timeline: a fence retires only after everything submitted before it, in every
// context. The real library knows only its own contexts and signals such a fence as soon as they
// are done, which for a guest of ours is before its GPU job (issue 15, point 1). So the real
// library's write_fence comes to us, and the VMM's write_fence is called only for ids whose
// work — the real library's and, as of the fence's creation, every kernel queue of every ROCM
// context (WorkSnapshot) — is finished. The VMM retires every id <= the one written (QEMU's
// virgl_write_fence, crosvm's fence handler), so holding one id holds every later one too.
//
// With nothing of ours outstanding the real library's calls pass through unchanged: same id,
// same thread, same moment. Ids are compared as the VMM does (unsigned, in creation order).
//
// Delivery: without VIRGL_RENDERER_ASYNC_FENCE_CB only on the VMM's thread (its calls into us:
// virgl_renderer_poll, which QEMU calls every 10 ms while fences are pending and right after
// each batch of commands, context_poll, and the real library's write_fence from inside its
// poll), never inside create_fence: QEMU queues a fenced command only after that returns. With it,
// also from one waiter thread of this class, started the first time a fence is held (bounded: one
// per process); if that thread cannot start, delivery falls back to the VMM's calls.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "context/work_snapshot.h"

namespace rvgl::hooks {

class GlobalFences {
 public:
  using WriteFenceFn = void (*)(void *cookie, uint32_t fence);

  ~GlobalFences() { stop(); }

  // A fresh renderer: the VMM's write_fence and cookie, and whether it may be called from any
  // thread. Drops anything left from before.
  void start(void *cookie, WriteFenceFn vmm_write, bool async);
  // Renderer reset or cleanup: held fences are dropped (the VMM forgets its own), the waiter
  // thread stops.
  void stop();

  // virgl_renderer_create_fence(id), before the real library sees it (in async mode it may write
  // the fence before its create_fence returns): `work` is every ROCM context's snapshot now.
  // VMM thread.
  void add(uint32_t id, std::vector<WorkSnapshot> work);
  // The real library refused fence `id` (no ctx0 renderer): its part counts as done. With
  // `ours`, the fence is written when our work allows even if nothing else was held. VMM thread.
  void real_refused(uint32_t id, bool ours);
  // The real library's write_fence(id): its work up to id is done (any thread in async mode).
  void real_signalled(void *cookie, uint32_t id);
  // Looks at held fences' work and writes the newest id now allowed (VMM thread, or any thread
  // in async mode).
  void check();

  // For tests: fences created and not yet written to the VMM.
  size_t held() const;

 private:
  struct Entry {
    uint32_t id;
    bool real_done;
    std::vector<WorkSnapshot> work;
    std::optional<uint32_t> before;  // the fence created just before it, held or not
  };
  // Drops finished fences from the front; the id to write now, if any.
  std::optional<uint32_t> collect_locked();
  void deliver(std::optional<uint32_t> id);
  void ensure_waiter_locked();
  // The waiter thread: waiter_loop(), with nothing let out of it.
  void waiter_main();
  void waiter_loop();

  mutable std::mutex mu_;
  std::condition_variable cv_;
  void *cookie_ = nullptr;
  WriteFenceFn vmm_write_ = nullptr;
  bool async_ = false;
  std::deque<Entry> entries_;
  std::optional<uint32_t> real_max_;    // newest id the real library wrote (or that it refused)
  std::optional<uint32_t> released_;    // newest id collect_locked() let go
  std::optional<uint32_t> last_added_;  // the newest fence created
  // Without ASYNC_FENCE_CB: an id let go inside the VMM's create_fence, written at its next poll.
  std::optional<uint32_t> deferred_;
  bool stopping_ = false;
  bool waiter_failed_ = false;
  std::thread waiter_;

  // One write_fence at a time, in increasing id order. Recursive: a VMM may call us back from its
  // write_fence (a new fence, a poll), which may deliver in turn.
  std::recursive_mutex deliver_mu_;
  std::optional<uint32_t> delivered_;
};

}  // namespace rvgl::hooks
