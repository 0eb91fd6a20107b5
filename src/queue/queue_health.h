// The one owner of a context's kernel-queue health (DESIGN.md D7, docs/threads.md).
//
// A queue's transition to lost — guilty, innocent, VRAM lost, VM fault, hang — is classified here
// and nowhere else, on the completion engine's thread, from one observation taken in a fixed order
// (the queues' job errors first — a job that wrote its user fence page ran to its end and has
// none, any other is asked of the kernel; after a reset the probe reported, every job up to then
// is asked, since a job the timeout's soft recovery killed writes its user fence too (its fence
// carries -ENODATA: amdgpu_ring_soft_recovery()) — then the kernel contexts' state: the probe's one
// answer when no job failed and the device was not reset, else each queue's context
// (reset_probe.h); then the VM's fault cache once for the whole context), and each cause posts
// exactly one event. A reset counted while a check runs is taken into that observation: a
// context that shows one the probe had not reported has the probe asked again
// (read_ctx_states()), and a queue is innocent only once its look reached the jobs it had
// submitted when the reset was seen (a killed job past the look may be the reset's cause).
// QUEUE_STATE only reads what this class published. Events of a check are posted before its state
// is published, so a guest that sees a queue lost also finds the records that say why.
//
// When: after a queue's work reached a new point (its watch saw it; before the point's fences go,
// unless its job ran to its end and the kernel signalled it), at most once per interval
// per context (1 ms, longer when many queues of the process are busy: health_pacer.h; the rest is
// deferred to a deadline, never dropped), soon after the VMM's thread
// saw the kernel refuse a submission, after another context's check heard of a device reset
// first (reset_notices.h: an idle context has no completion to be checked after), and, with only
// the probe asked unless something is marked, while a hang's reset is expected but not yet
// counted (reset_expect_at_) and once, kQuietLookNs after the last check that trusted its
// completions (quiet_look_at_: a soft recovery is counted after the killed job signalled); such a
// look keeps its own schedule and does not count for the interval. User
// queues have no completion the host sees (the guest rings its own doorbell), so while a context
// has any they are looked at every kUserPollNs. The fault cache is read on every check of queues,
// which is how a VM fault that did not fail its job (the kernel's default, amdgpu.vm_fault_stop=0)
// is found.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "amdgpu/amdgpu_device.h"
#include "events/event_ring.h"
#include "queue/completion_engine.h"
#include "queue/kernel_queue.h"
#include "queue/reset_notices.h"
#include "queue/reset_probe.h"
#include "queue/user_queue.h"

namespace rvgl {

class QueueHealth final : public CompletionEngine::Watch, public ResetListener {
 public:
  // Checks of one context are at least HealthPacer::interval_ns() apart. A check of n queues with
  // new completions costs 2 ioctls when their newest jobs ran to their end (their user fences say
  // so: no job error to ask) and the device was not reset (the reset probe, the fault cache); a
  // queue whose job did not write its user fence (it failed) adds a WAIT_CS, once submit() has
  // recorded that job's fence (the GPU may finish it while the CS ioctl returns: the look waits
  // for the record, and only if that takes over 100 ms classifies nothing and looks again,
  // KernelQueue::job_error()); a queue also gets a context query when the probe says the device
  // was reset since that queue's last one, when the kernel refused its work, or when its newest
  // job's fence was not recorded yet (it wrote its user fence); when a job failed, every queue
  // gets one (n + 2 + the WAIT_CSs: the probe is asked then too, so a reset that came with the
  // failure is heard of), and the failed queue's earlier recent jobs are asked for the first
  // failure (one WAIT_CS each). A queue whose point is known only from its user fence adds a
  // SYNCOBJ_QUERY: a check classifies only what the kernel signalled (the fault cache lags the
  // user fence), and is postponed by an interval while it has not. A check whose probe said no
  // reset while a context it read shows one no answer reported since asks the probe once more.
  // After the probe reports a reset, each job a queue had submitted by then costs a WAIT_CS once it
  // is done (the newest 32 at most); without a probe, every job.
  static constexpr int64_t kUserPollNs = 2'000'000;
  // User queues of every context of the process share one budget of looks: with more than
  // kUserPollNs / kUserPollShareNs of them, each is looked at every count x kUserPollShareNs, so
  // the engine thread's polling stays under one look per 50 us whatever the guests create.
  static constexpr int64_t kUserPollShareNs = 50'000;
  // The interval between two looks at a context's user queues with `user_queues` in the process.
  static int64_t user_poll_interval_ns(uint64_t user_queues);
  // How long after a check that trusted its queues' completions the probe is asked again when
  // nothing else brings a check (quiet_look_at_). The kernel's timeout handler counts a soft
  // recovery on the worker that waits for the killed job's fence, µs after it signalled; the
  // rest is margin for a preempted worker, and a context whose work completes more often than
  // this never pays the look.
  static constexpr int64_t kQuietLookNs = 50'000'000;

  // rearm: called, outside this class's locks, after a deadline moved earlier, so the engine
  // takes it into its sleep (CompletionEngine::deadline_earlier).
  // Joins the process's ResetNotices: a reset another context hears of first has this one look
  // at its live queues too (reset_notices.h).
  QueueHealth(std::shared_ptr<AmdgpuDevice> dev, EventRing &events, std::function<void()> rearm);
  ~QueueHealth();
  QueueHealth(const QueueHealth &) = delete;
  QueueHealth &operator=(const QueueHealth &) = delete;

  // VMM thread.
  void add(uint32_t handle, std::shared_ptr<KernelQueue> q);
  void add_user(uint32_t handle, std::shared_ptr<UserQueue> q);
  // The queue (kernel or user) is never looked at again, whatever is in flight.
  void remove(uint32_t handle);
  // The kernel refused a submission with `err` (ECANCELED, ENODEV): check soon.
  void refused(uint32_t handle);

  // Engine thread: queue `handle` (its watch) reached `point`, which its timeline may not know
  // yet (the check looks at the job of the newer of the two). A check postponed for another
  // point's kernel signal runs first, without this completion. Marks it for a check; true when
  // the check is due now, and the caller runs it (check()): before it makes the point known, or
  // right after it delivered the point's fences when the job there ran to its end (QueueWatch).
  // `queue` is the one the caller watches: a handle reused by a newer queue is not it.
  bool completed(uint32_t handle, const KernelQueue &queue, uint64_t point, int64_t now_ns);
  // What the caller of completed_later() knows of the point it reports.
  struct Known {
    bool ran_to_end = false;  // the user fence shows the job there done: no error of its own
    bool signalled = false;   // the kernel signalled it: that job's faults are recorded
  };
  // VMM thread (poll mode: the kernel woke it, not the engine; or create_fence found the job
  // done in the user fence): queue `handle` reached `point`.
  // When no check is under way and either the interval since the last check has not passed, or
  // it has and the job ran to its end and was signalled (a check now would find nothing that
  // must come before its fences), the completion is marked for a check at the interval's end (at
  // once if it has passed), as completed() would, and true says the caller may make the point
  // known; otherwise nothing is marked and false says the engine must look first (it classifies
  // before the point is known).
  bool completed_later(uint32_t handle, const KernelQueue &queue, uint64_t point, int64_t now_ns,
                       Known known);
  // Engine thread: classifies every marked queue now.
  void check(int64_t now_ns);

  // Called (with this class's lock held: it must take only a leaf lock) whenever deadline_ns()
  // changes, so the engine files the new deadline instead of asking every context on every
  // wakeup (CompletionEngine::deadline_moved). Set once, before any queue is added.
  void on_deadline_moved(std::function<void()> moved);

  // CompletionEngine::Watch (a timer-only watch).
  uint64_t arm_point() override { return 0; }
  void reached(uint64_t) override {}
  int64_t deadline_ns() override;
  void tick(int64_t now_ns) override;

  // ResetListener (another context's check, the engine's thread): every live queue is marked
  // for this context's next allowed check.
  void reset_elsewhere() override;

  // The reset probe's kernel context could not be created (its -errno), 0 if it was.
  int probe_error() const { return probe_.error(); }
  uint64_t checks() const;  // for tests: checks that have ended (check_mu_ released)
  // For tests: no kernel queue is marked for a check and none is under way, so every completion
  // reported so far has been classified (user queues are looked at on a schedule instead).
  bool settled() const;

 private:
  struct Tracked {
    std::shared_ptr<KernelQueue> queue;
    bool dirty = false;        // new completions (or a refusal) since the last check
    bool refused = false;      // the kernel refused its work since the last check
    int64_t busy_window = -1;  // the last window HealthPacer counted this queue busy in
    uint64_t reached = 0;      // the newest point the watch reported
    uint64_t looked = 0;       // the newest point a check classified the queue at
    // The newest point known signalled by the kernel (completed(), or a check's query), which
    // `reached` may pass: a point read from the user fence (completed_later()).
    uint64_t signalled = 0;
    // The first probe answer whose "reset" makes this queue's last context state stale: its
    // context was created or queried before that answer was asked.
    uint64_t ctx_stale_from = 0;
    // The first probe answer that may report a reset this queue's context can show: the first
    // asked after the context was created or last read. A reset the context shows and no answer
    // from there on reported was counted while a check ran (read_ctx_states()).
    uint64_t resets_shown_from = 0;
    // A job the timeout's soft recovery killed wrote its user fence like one that ran to its end
    // (the ring goes on past it); only its kernel fence (-ENODATA) and the device's reset counter
    // say otherwise. Once the probe reports a reset, the jobs up to verify_to (what the queue had
    // submitted then) are asked of the kernel whatever their user fences say; those up to
    // verified_to have been.
    uint64_t verify_to = 0;
    uint64_t verified_to = 0;
    // Since when the kernel has not answered for this queue (unread below), 0 while it does.
    int64_t unread_since = 0;
    // Marked while a check waited for a kernel signal (waiting_signal_) and not part of it: made
    // dirty once that check has run (release_held_locked()), never joined to it.
    bool held = false;
  };
  struct TrackedUser {
    std::shared_ptr<UserQueue> queue;
    bool dirty = false;
  };
  // What one check saw of one kernel queue.
  struct Seen {
    uint32_t handle;
    std::shared_ptr<KernelQueue> q;
    KernelQueue::Status before;
    uint64_t reached = 0;    // the newest point known done: the watch's or the timeline's
    uint64_t signalled = 0;  // the newest point known signalled by the kernel
    int job_error = 0;
    uint64_t ctx_flags = 0;
    bool refused = false;
    bool job_known = false;  // the job at `reached` itself, before its error was read
    uint64_t ctx_stale_from = 0;
    uint64_t resets_shown_from = 0;           // as Tracked's
    bool ctx_read = false;                    // ctx_flags came from the queue's own context
    uint64_t verify_to = 0, verified_to = 0;  // as Tracked's
    uint64_t failed_seq = 0;                  // the job job_error is of: the first that failed
    // job_error is the context's, which every job of it answers (Linux 6.5+, kernel_queue.h
    // context_error()): failed_seq was told apart by the user fence.
    bool shared_error = false;
    // A query about its jobs or its context failed: nothing is classified from this look (a job
    // that failed must not pass for clean), and the queue is looked at again.
    bool unread = false;
    // Marked guilty with work the kernel has not signalled yet: left, with the fault cache, to
    // the check that signal brings (check()).
    bool awaits_signal = false;
  };
  // Asks the probe, then reads the context state of the queues of `seen` that need their own
  // query; `none_failed`: no job of theirs failed, so the probe may answer for the others. The
  // probe is not asked when no queue of `seen` is live, unless `probe_anyway`. Returns its answer
  // (kNoReset when not asked); *news: a reset no other context had told of (reset_notices.h).
  // When the probe said no reset and a context shows one anyway (counted while the check ran),
  // the probe is asked once more and, if it reports it, every context is read after its answer.
  // Engine thread.
  ResetProbe::Answer read_ctx_states(std::vector<Seen> &seen, bool none_failed, bool probe_anyway,
                                     bool *news);
  // Asks the probe, files its answer (a reset has every queue's jobs submitted so far verified,
  // and the queues outside `seen` marked), then verifies the jobs of `seen` still to be; *news
  // is set when the answer was a reset no other context had told of; *last_reset: the number
  // of the last answer that said "reset". Engine thread.
  ResetProbe::Answer ask_probe(std::vector<Seen> &seen, bool *news, uint64_t *last_reset);
  // A live queue of `seen` whose context was read shows a reset its published state does not
  // have, no failed job of its own explains it, and no probe answer since its context was
  // created or last read (up to `last_reset`, the last that said "reset") reported one.
  static bool reset_while_checking(const std::vector<Seen> &seen, uint64_t last_reset);
  // After a check that asked the probe (`answer`): a hang it classified without the reset that
  // ended it has the probe asked again later; a reset ends that. `follow_up`: this check was
  // such a later look. mu_ held.
  // `trusted`: the check looked at live queues; with no reset reported a quiet look is filed
  // unless a hang's follow-up looks are (quiet_look_at_).
  void expect_reset_locked(int64_t now_ns, ResetProbe::Answer answer, bool hang, bool follow_up,
                           bool trusted);
  // The probe reported a reset: every queue's jobs submitted so far are to be asked of the
  // kernel, and the live queues outside `seen` are marked for a check (`mark`: not when the probe
  // cannot tell, which would mark them on every check). mu_ held.
  void verify_after_reset_locked(std::vector<Seen> &seen, bool mark);
  // Asks the kernel about the jobs of `seen` still to be verified after a reset. Engine thread.
  static void verify_jobs(std::vector<Seen> &seen);
  // A look that classified nothing for `s` (it, or another queue of the look, was not read):
  // marks it to be looked at again (kLookAgain: a deadline is to be filed); once the kernel has
  // not answered for it for kUnreadGiveUpNs, it is to be given up (kGaveUp). Takes mu_.
  enum class Unread { kGone, kLookAgain, kGaveUp };
  Unread unread_look(const Seen &s, int64_t now_ns);
  // Publishes `queues` (kGaveUp) lost with -EIO, after posting (`fault_unowned`: no queue of the
  // look failed, which would own it) a fault the fault cache holds that no look attributed.
  // Takes mu_.
  void give_up(const std::vector<const Seen *> &queues, bool fault_unowned);
  // Classifies the user queues looked at; `fault_queue`, when not RVGL_EVENT_QUEUE_NONE, is the
  // one that gets `fault`.
  void check_users(std::vector<std::pair<uint32_t, std::shared_ptr<UserQueue>>> &users,
                   uint32_t fault_queue, const rvgl_drm_amdgpu_info_gpuvm_fault &fault);
  // Whether a check is due and allowed now (some queue marked, its interval passed); if not, sets
  // the deadline. `dirty`: the caller has just marked a queue. mu_ held; the caller checks after
  // releasing it.
  bool check_due_locked(int64_t now_ns, bool dirty);
  // A hang's follow-up look or a quiet look is due. mu_ held.
  bool look_due_locked(int64_t now_ns) const;
  // Whether the kernel signalled every point `seen` is about to classify; asks the timeline of
  // each queue whose point is known only from its user fence. Engine thread.
  bool all_signalled(std::vector<Seen> &seen);
  // Drops from gone_ the queues whose work is over (mu_ held).
  void prune_gone_locked();
  // Whether a kernel queue this look does not cover, or one lost before it, has work that may
  // have made a fault in the cache (takes mu_; may_have_faulted() in queue_health.cpp): a later
  // look of that queue classifies it.
  bool queues_may_have(const std::vector<Seen> &seen, bool stop_mode) const;
  // Whether anything but the look's own queues may have made it: queues_may_have(), a destroyed
  // queue whose jobs may still run (gone_), or a user queue not lost that the look did not take
  // (`users`: its progress is invisible). No look classifies a destroyed queue, so only a rule
  // that names a queue asks about it. Takes mu_.
  bool others_may_have(const std::vector<Seen> &seen,
                       const std::vector<std::pair<uint32_t, std::shared_ptr<UserQueue>>> &users,
                       bool stop_mode);
  // Files a check of what is marked: the next allowed check's deadline, or now when one is
  // allowed now (for a caller that does not run it itself).
  void file_check_locked(int64_t now);
  // Marks `t` for a check: dirty, or held while a check waits for a signal without it.
  void mark_locked(Tracked &t);
  // After a check: once none waits for a signal, the held queues are marked, and their check
  // filed.
  void release_held_locked(int64_t now);
  // Marks what `seen` and `users` took again, for a check one interval later.
  void postpone(const std::vector<Seen> &seen,
                const std::vector<std::pair<uint32_t, std::shared_ptr<UserQueue>>> &users,
                int64_t now_ns);
  void post(uint32_t type, uint32_t queue, uint64_t p0, uint64_t p1);
  // A VM_FAULT record of `f` for `queue` (RVGL_EVENT_QUEUE_NONE: for no queue).
  void post_fault(uint32_t queue, const rvgl_drm_amdgpu_info_gpuvm_fault &f);
  // The VM's fault cache into *f when it holds a fault no look has taken yet, which is taken now
  // (last_fault_). Engine thread (checks run there only).
  bool take_new_fault(rvgl_drm_amdgpu_info_gpuvm_fault *f);
  // Takes a fault peek_new_fault() found: no later look finds it new (engine thread).
  void took_fault(const rvgl_drm_amdgpu_info_gpuvm_fault &f);
  // The same read, leaving the fault for a later look (last_fault_ unchanged).
  bool peek_new_fault(rvgl_drm_amdgpu_info_gpuvm_fault *f);
  // Publishes the deadline (deadline_ns() is a load, not a lock) and tells the engine it moved:
  // called after every change of due_ns_ or next_user_poll_ns_.
  void publish_deadline_locked();

  std::shared_ptr<AmdgpuDevice> dev_;
  ResetProbe probe_;  // created before any queue's context: it vouches only for later ones
  EventRing &events_;
  std::function<void()> rearm_;
  std::function<void()> moved_;  // under mu_

  // Held for a whole check (engine thread); remove() takes it to wait a check out,
  // completed_later() tries it to see one under way. Outside mu_.
  mutable std::mutex check_mu_;
  mutable std::mutex mu_;  // queues_, last_check_ns_, due_ns_, checks_, probe_asks_, ...
  // Probe answers so far, and the number of the last that said "reset" (0: none). A queue's
  // context state is current while probe_last_reset_ < its ctx_stale_from.
  uint64_t probe_asks_ = 0;
  uint64_t probe_last_reset_ = 0;
  // Another context told of a reset since the probe was last asked: a reset the probe reports
  // now is told to no one again.
  bool reset_told_ = false;
  std::map<uint32_t, Tracked> queues_;
  std::map<uint32_t, TrackedUser> users_;
  // Destroyed kernel queues whose jobs may still run, or whose completions no look took
  // (remove()): never classified again, but their work may be what made a fault in the cache
  // (others_may_have()). Not kept alive here (their kernel contexts go when the context lets
  // them go). Dropped once their work is over and a look has dealt with the fault cache after
  // that (prune_gone_locked()). Out of memory keeping one, gone_untracked_ says so for the
  // context's life: every fault is then posted for no queue, as one may be that queue's. These
  // and cache_told_ are touched only with check_mu_ held (by remove() and by checks).
  struct Gone {
    std::weak_ptr<KernelQueue> queue;
    uint64_t done_at = 0;  // 1 + cache_told_ when its work was first seen over; 0: not yet
  };
  std::vector<Gone> gone_;
  bool gone_untracked_ = false;
  // Reads of the fault cache that dealt with what it held: found nothing new, or took it.
  uint64_t cache_told_ = 0;
  int64_t next_user_poll_ns_ = 0;
  int64_t last_check_ns_ = 0;
  int64_t due_ns_ = 0;
  uint64_t checks_ = 0;
  // due_ns_ when set, else the earliest of the user poll and the looks (0: none).
  std::atomic<int64_t> deadline_{0};
  // A check was postponed for a kernel signal (postpone()) and has not run since. No completion
  // marked now joins it: the engine runs the waiting check first (completed()), and
  // completed_later() leaves the completion to the engine. A queue that check did not take and
  // that is marked while it still waits (it was postponed again) is held (Tracked::held), which
  // others_may_have() counts as work not looked at, as it would a queue the look had joined.
  bool waiting_signal_ = false;

  // Engine thread only (checks never run concurrently: they run on that thread).
  rvgl_drm_amdgpu_info_gpuvm_fault last_fault_{};
  // DEVICE_RESET is posted once per VRAM loss: the first time a kernel queue of the context
  // reports one the device's loss count has moved to. The count is read outside mu_ (an
  // ioctl), the decision made under it, once the queue is known to be still there.
  struct VramLossCount {
    bool known = false;  // the kernel answered
    uint32_t value = 0;
  };
  VramLossCount read_vram_loss_count() const;
  // True when `now` is a loss not told yet (mu_ held), which counts as told from then on.
  bool vram_loss_untold(const VramLossCount &now);
  bool vram_loss_told_ = false;
  VramLossCount vram_loss_last_;
  // A check classified a hang before the probe reported the reset that ended it: when soft
  // recovery or a ring reset ends a hang, the kernel moves the device's reset counter only after
  // the hung job's fence signalled (amdgpu_job_timedout()), and the context's other queues (and
  // other contexts) would hear of that reset only at a later completion. So the probe is asked
  // again at reset_expect_at_ (0: no reset expected), 1, 2, 4, ... intervals later, at most
  // kResetExpectLooks times (about a second), with nothing else looked at unless marked. Under
  // mu_.
  static constexpr uint32_t kResetExpectLooks = 10;
  // How long the kernel may fail to answer for a queue, looked at again at every interval,
  // before it is given up as lost (-EIO): a transient ENOMEM must not cost a healthy queue.
  static constexpr int64_t kUnreadGiveUpNs = 1'000'000'000;
  int64_t reset_expect_at_ = 0;
  uint32_t reset_expect_looks_ = 0;
  // A check that looked at live queues and whose probe reported no reset trusted the jobs it did
  // not ask the kernel about, and the reset a soft recovery of one of them counts after its
  // fence signalled may not have been counted yet. Another check kQuietLookNs after it (the probe
  // alone when nothing else is marked) hears of that reset; a later check refiles it, so work that
  // keeps completing pays nothing. Under mu_. 0: none.
  int64_t quiet_look_at_ = 0;
};

}  // namespace rvgl
