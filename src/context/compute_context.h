// A guest's ROCm compute context: the one object vrend-hooks talks to for a context id of ours.
//
// It owns a private amdgpu device fd (its own GPU VM), decodes the guest's command stream through
// one dispatch table, and keeps every guest-visible name (objects, resources, queues, VA ranges)
// in per-context tables. The VMM calls it from one thread at a time; the process's completion
// engine (one thread for every context) and SPM workers call back into the fence, health and event
// parts, whose owners docs/threads.md names (DESIGN.md D9).
#pragma once

#include <sys/uio.h>

#include <array>
#include <atomic>
#include <mutex>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>

#include "amdgpu/amdgpu_device.h"
#include "context/capset_assembly.h"
#include "events/event_ring.h"
#include "context/capture_writer.h"
#include "context/command_table.h"
#include "context/config.h"
#include "context/context_memory.h"
#include "context/frame_decoder.h"
#include "context/work_snapshot.h"
#include "memory/handle_table.h"
#include "memory/shared_page.h"
#include "queue/completion_engine.h"
#include "queue/fence_delivery.h"
#include "queue/kernel_bo_list.h"
#include "queue/queue_health.h"
#include "queue/queue_watch.h"
#include "queue/kernel_queue.h"
#include "queue/user_queue.h"
#include "spm/spm_session.h"
#include "util/unique_fd.h"

namespace rvgl {

// Counters a test or benchmark may read.
struct ContextStats : MemoryStats {
  uint32_t queues = 0;
};

class ComputeContext {
 public:
  struct Options {
    uint32_t ctx_id = 0;
    const Config *config = nullptr;
    UniqueFd drm_fd;            // the VMM's choice (get_drm_fd); else config / first node
    bool async_fences = false;  // VMM set VIRGL_RENDERER_ASYNC_FENCE_CB
    FenceDelivery::Callback on_fence;
    // Whether the process may still spend `n` more file descriptors without eating into what
    // the VMM keeps for itself. Unset: always.
    std::function<bool(int n)> descriptor_left;
  };

  // The RVGL_FEATURE_* bits this build implements.
  static uint64_t implemented_features();

  // Opens the configured device (or the first amdgpu node) and fills the capset a guest reads.
  static int probe_capset(const Config &cfg, rvgl_capset *out);

  static std::unique_ptr<ComputeContext> create(Options opts, int *err);
  ~ComputeContext();
  ComputeContext(const ComputeContext &) = delete;
  ComputeContext &operator=(const ComputeContext &) = delete;

  // A command buffer from the guest: 0, or -EINVAL when a frame could not be parsed.
  int submit_cmd(std::span<const uint8_t> cmds);

  // RESOURCE_CREATE_BLOB for this context: the shared page, a BO claim, or a userptr blob.
  int create_blob(const BlobArgs &args, BlobExport *out);
  // A resource imported from its dma-buf: another context's, or one of ours coming back (the
  // same object then). `exporter_charge`: ContextMemory::attach_foreign.
  int attach_foreign(uint32_t res_id, UniqueFd dmabuf, uint64_t size,
                     std::shared_ptr<const void> exporter_charge = nullptr) {
    return memory_->attach_foreign(res_id, std::move(dmabuf), size, std::move(exporter_charge));
  }
  // The resource is gone from this context (detach or unref): its name is dropped and, for
  // userptr memory, nothing of the host uses the guest's pages once this returns (GPU mappings,
  // SPM destinations, udmabufs, aliases).
  // Blocks while jobs submitted when the pages were mapped still run (guest_page_release.cpp).
  void detach_resource(uint32_t res_id);
  bool has_resource(uint32_t res_id) const { return memory_->has_resource(res_id); }
  int export_resource(uint32_t res_id, BlobExport *out);

  // Fences one context may have waiting (create_fence: -ENOSPC beyond).
  static constexpr uint64_t kMaxWaitingFences = 65536;
  // mergeable: VIRGL_RENDERER_FENCE_FLAG_MERGEABLE was given.
  int create_fence(uint32_t ring_idx, uint64_t fence_id, bool mergeable = false);
  int poll_fd() const { return delivery_->poll_fd(); }
  // Poll mode, VMM thread: reports what woke it (docs/threads.md "Poll mode without a hop"), then
  // delivers.
  void poll();
  // Context destroy: everything the destructor does, now. No callback for this context runs once
  // this returns (not even the rest of a batch whose callback called it), its kernel objects are
  // gone and every use of the guest's pages is revoked, although the object itself may live on
  // until a poll of it in progress on this thread returns. Nothing else may be called after.
  void close();

  const rvgl_capset &capset() const { return facts_.capset; }
  uint32_t ctx_id() const { return ctx_id_; }
  ContextStats stats() const;
  const FenceDelivery &fences() const { return *delivery_; }
  const QueueHealth &health() const { return *health_; }
  const CompletionEngine &completion_engine() const { return *engine_; }
  const EventRing &events() const { return events_; }
  uint64_t bo_list_updates() const { return memory_->bo_list_updates(); }
  // Every kernel queue's last submitted point not yet known reached, destroyed queues' included
  // (work_snapshot.cpp): what a global fence created now must wait for, and what may still reach
  // guest pages the GPU VM mapped. VMM thread.
  WorkSnapshot work_snapshot() const;
  // The capture file, when RVGL_CAPTURE_DIR is set ("" otherwise).
  std::string capture_path() const { return capture_ ? capture_->path() : std::string(); }

 private:
  struct Queue {
    std::shared_ptr<KernelQueue> kernel;  // shared with its watch and the health owner
    std::shared_ptr<UserQueue> user;      // shared with the health owner
    uint32_t ring_idx = 0;
    std::unique_ptr<QueueWatch> watch;  // kernel queues: the completion engine's view of it
    uint64_t watch_id = 0;
    uint64_t last_fence = 0;  // ring position of the newest fence that waits on its timeline
  };
  // A destroyed queue's watch (and so its kernel queue), kept while fences created on its ring
  // before the destroy wait, or jobs it submitted are not known to be done.
  struct DrainingWatch {
    std::unique_ptr<QueueWatch> watch;
    uint64_t id;
    uint32_t ring;
    uint64_t fences;  // its newest fence's position on the ring (Queue::last_fence)
  };
  enum class RingUse : uint8_t { kFree, kQueue, kSpm };

  explicit ComputeContext(const Options &opts);
  static const CommandTable &table();

  // ---- handlers (handlers_*.cpp) ----
  int32_t cmd_nop(const Request &, Response &);
  int32_t cmd_query_info(const Request &, Response &);
  int32_t cmd_bo_create(const Request &, Response &);
  int32_t cmd_bo_free(const Request &, Response &);
  int32_t cmd_va_map(const Request &, Response &);
  int32_t cmd_va_unmap(const Request &, Response &);
  int32_t cmd_queue_create(const Request &, Response &);
  int32_t cmd_queue_destroy(const Request &, Response &);
  int32_t cmd_submit(const Request &, Response &);
  int32_t cmd_queue_state(const Request &, Response &);
  int32_t cmd_spm_acquire(const Request &, Response &);
  int32_t cmd_spm_release(const Request &, Response &);
  int32_t cmd_spm_set_dest(const Request &, Response &);

  // ---- helpers ----
  int create_shared_page(const BlobArgs &args, BlobExport *out);
  int spm_check(uint32_t xcp) const;
  void release_spm(uint32_t xcp);
  uint64_t device_key() const;
  void post_event(uint32_t type, uint32_t queue, uint64_t p0, uint64_t p1);
  // Drops draining watches no fence and no unfinished job needs any more (VMM thread).
  void collect_drained();
  // What a hand-back of guest pages waits for (guest_page_release.cpp): the work submitted when
  // it began, or, with no memory for a snapshot, all the work submitted when it waits (the same
  // work: only the VMM's thread submits, and it is the one handing the pages back).
  struct PageUsers {
    WorkSnapshot snapshot;
    bool all_work = false;
  };
  PageUsers guest_page_users() const;
  // Blocks until those jobs are done (bounded: guest_page_release.cpp). Allocates nothing.
  void wait_for_guest_page_users(PageUsers &users);
  void wait_for_guest_page_users(PageUsers &users, int64_t abs_deadline_ns);
  void wait_for_submitted_work(int64_t abs_timeout_ns) const;
  // Every kernel queue whose jobs may still run: the live ones, and destroyed ones still draining
  // (QUEUE_DESTROY). User queues are the guest's: it tracks their progress itself.
  template <class F>
  void for_each_kernel_queue(F &&f) const {
    queues_.for_each([&](uint32_t, const Queue &q) {
      if (q.kernel) f(*q.kernel);
    });
    for (const auto &d : draining_)
      f(d.watch->queue());
  }
  bool drained(const DrainingWatch &d) const;
  void unwatch_queue(Queue &q);
  // Only a poll-mode context on an engine with eventfds has points delegated to the VMM's thread
  // (the kernel signals its poll fd for them in place of the engine's eventfd).
  bool delegates_points() const {
    return delivery_->direct_wake_fd() >= 0 && engine_->uses_eventfd();
  }
  // Poll mode: if the kernel signalled the poll fd for the point the engine registered for this
  // watch, takes that point (the watch's own path when health would defer) into fired_.
  void report_delegated(QueueWatch &w, uint64_t id, int64_t now_ns);
  // One look of poll(): reports the delegated points reached, delivers, registers again; false
  // when a callback closed the context.
  bool deliver_polled();

  uint32_t ctx_id_;
  const Config &config_;
  const ContextLimits &limits_;
  const std::function<bool(int)> descriptor_left_;  // Options::descriptor_left
  std::shared_ptr<AmdgpuDevice> dev_;
  DeviceFacts facts_;
  FrameDecoder decoder_;
  std::unique_ptr<SharedPage> shmem_;  // VMM thread
  // shmem_ once it is complete, for other threads (SPM workers): it may come after they start.
  std::atomic<SharedPage *> shmem_published_{nullptr};
  ShmemView no_shmem_;
  std::unique_ptr<ContextMemory> memory_;  // objects, resources, VA space, quotas
  HandleTable<Queue> queues_;
  std::array<RingUse, RVGL_RING_COUNT> rings_{};
  std::array<uint32_t, RVGL_RING_COUNT> ring_queue_{};
  // Fence side, in destruction order (members die bottom-up): watches before what they refer to.
  std::unique_ptr<FenceDelivery> delivery_;
  EventRing events_;
  std::unique_ptr<QueueHealth> health_;
  std::shared_ptr<CompletionEngine> engine_;
  uint64_t health_timer_ = 0;
  std::vector<DrainingWatch> draining_;
  // poll(): the delegated points it found reached, handed to the engine after delivering.
  struct Fired {
    uint64_t id;
    uint64_t point;
    bool handled;
  };
  std::vector<Fired> fired_;
  std::array<std::unique_ptr<SpmSession>, 1> spm_;  // per XCP of the context's node
  // What every SPM session this context started reports through, released ones finishing on the
  // reaper included; cut first when the context goes.
  std::shared_ptr<SpmCallbacks> spm_callbacks_;
  std::unique_ptr<CaptureWriter> capture_;  // RVGL_CAPTURE_DIR
};

}  // namespace rvgl
