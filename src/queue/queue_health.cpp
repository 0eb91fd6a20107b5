#include "queue/queue_health.h"

#include <algorithm>
#include <cerrno>
#include <new>
#include <utility>
#include <vector>

#include "amdgpu/kernel_params.h"
#include "queue/health_pacer.h"
#include "util/monotonic_clock.h"

namespace rvgl {

namespace {

bool same_fault(const rvgl_drm_amdgpu_info_gpuvm_fault &a,
                const rvgl_drm_amdgpu_info_gpuvm_fault &b) {
  return a.addr == b.addr && a.status == b.status && a.vmhub == b.vmhub;
}

}  // namespace

QueueHealth::QueueHealth(std::shared_ptr<AmdgpuDevice> dev, EventRing &events,
                         std::function<void()> rearm)
    : dev_(std::move(dev)), probe_(dev_), events_(events), rearm_(std::move(rearm)) {
  ResetNotices::process().join(this);
}

namespace {

// User queues of every context of the process (QueueHealth::kUserPollShareNs).
std::atomic<uint64_t> g_user_queues{0};

// Whether `q`'s work may have made a fault now in the VM's fault cache, its jobs known done up to
// `reached`; `unlooked`: it has completions no look has taken. A lost queue only by jobs still
// running. Where a faulting job stops (stop mode) only a job that did not run to its end may
// have: one in flight, halted at the fault, or failed and not looked at yet, which the user fence
// tells when the queue has one (its newest job wrote it: a fault would have made the context
// guilty and cancelled the jobs behind it). In the default mode the faulting job goes on and ends
// like any other, so completions no look has taken count too.
bool may_have_faulted(const KernelQueue &q, uint64_t reached, bool unlooked, bool lost,
                      bool stop_mode) {
  const bool past = q.work_past(std::max(reached, q.timeline()->known_reached()));
  if (lost) return past;
  if (stop_mode && q.tells_finished())
    return q.submitting() || (q.last_submitted() && !q.finished(q.last_submitted()));
  return unlooked || past;
}

}  // namespace

QueueHealth::~QueueHealth() {
  g_user_queues.fetch_sub(users_.size(), std::memory_order_relaxed);
  ResetNotices::process().leave(this);
}

int64_t QueueHealth::user_poll_interval_ns(uint64_t user_queues) {
  const uint64_t shared = std::min<uint64_t>(user_queues, INT64_MAX / kUserPollShareNs);
  return std::max(kUserPollNs, static_cast<int64_t>(shared) * kUserPollShareNs);
}

void QueueHealth::add(uint32_t handle, std::shared_ptr<KernelQueue> q) {
  std::lock_guard lk(mu_);
  Tracked t{std::move(q)};
  // Its context was created before now, maybe before the newest probe answer was asked: a reset
  // that answer reports may be one this context saw.
  t.ctx_stale_from = std::max<uint64_t>(probe_asks_, 1);
  t.resets_shown_from = probe_asks_ + 1;
  queues_[handle] = std::move(t);
}

void QueueHealth::add_user(uint32_t handle, std::shared_ptr<UserQueue> q) {
  {
    std::lock_guard lk(mu_);
    if (users_.insert_or_assign(handle, TrackedUser{std::move(q), false}).second)
      g_user_queues.fetch_add(1, std::memory_order_relaxed);
    if (!next_user_poll_ns_) {
      next_user_poll_ns_ =
          monotonic_ns() + user_poll_interval_ns(g_user_queues.load(std::memory_order_relaxed));
      publish_deadline_locked();
    }
  }
  rearm_();  // a new deadline
}

void QueueHealth::remove(uint32_t handle) {
  // A check in progress may hold the queue (its observation runs outside mu_): it ends first,
  // and publishes and posts what it saw of the queue. Erased in between, the queue lost that
  // check's records, a fault the check had taken from the cache among them (found by an audit).
  // Once this returns, the caller's reference is the last and the kernel object goes when the
  // caller drops it — a user queue's doorbell is free for the next queue at once (found by
  // TSan's slower schedule: re-create got EBUSY) — and no later check looks at the queue.
  std::lock_guard no_check(check_mu_);
  std::lock_guard lk(mu_);
  if (auto it = queues_.find(handle); it != queues_.end()) {
    prune_gone_locked();
    // It has jobs no check has classified: they may still run, or have ended with their faults
    // still in the cache, unread. One a check classified was looked at with the cache read after
    // its end; a mark alone says nothing (the same point is often made known twice).
    const Tracked &t = it->second;
    if (t.queue->work_past(t.looked)) {
      try {
        gone_.push_back({t.queue, 0});
      } catch (const std::bad_alloc &) {
        gone_untracked_ = true;
      }
    }
    queues_.erase(it);
  }
  if (users_.erase(handle)) g_user_queues.fetch_sub(1, std::memory_order_relaxed);
  if (users_.empty()) {
    next_user_poll_ns_ = 0;
    publish_deadline_locked();
  }
}

void QueueHealth::refused(uint32_t handle) {
  {
    std::lock_guard lk(mu_);
    auto it = queues_.find(handle);
    if (it == queues_.end()) return;
    mark_locked(it->second);
    it->second.refused = true;
    due_ns_ = monotonic_ns();
    publish_deadline_locked();
  }
  rearm_();  // rare: the kernel refused work; let the engine run the check
}

bool QueueHealth::completed(uint32_t handle, const KernelQueue &queue, uint64_t point,
                            int64_t now) {
  std::unique_lock lk(mu_);
  if (waiting_signal_) {
    // Rare (a fault's interrupt late behind the user fence), and not paced: at most one look per
    // completion while the kernel has not signalled what the waiting check classifies.
    lk.unlock();
    check(now);
    lk.lock();
  }
  auto it = queues_.find(handle);
  // Destroyed (its handle maybe already a new queue's): never looked at again.
  if (it == queues_.end() || it->second.queue.get() != &queue) return false;
  mark_locked(it->second);
  if (point > it->second.reached) it->second.reached = point;
  if (point > it->second.signalled) it->second.signalled = point;
  HealthPacer::process().note_busy(now, &it->second.busy_window);
  // Held: looked at once the waiting check has run, which files its check then.
  if (it->second.held) return false;
  return check_due_locked(now, true);
}

bool QueueHealth::completed_later(uint32_t handle, const KernelQueue &queue, uint64_t point,
                                  int64_t now, Known known) {
  // A check under way (it holds check_mu_ throughout) may be classifying this very completion:
  // not deferred. Held to the end, so none starts before the mark below is made.
  std::unique_lock no_check(check_mu_, std::try_to_lock);
  if (!no_check.owns_lock()) return false;
  bool new_deadline = false;
  {
    std::lock_guard lk(mu_);
    const int64_t interval = HealthPacer::process().interval_ns(now);
    // A check due now classifies before the point is known, unless the job there ran to its
    // end (no error of its own) and the kernel signalled it (its faults are in the fault cache,
    // and a point not signalled yet would hold the check, and every completion marked with it,
    // until it is): then its check may follow its delivery (the deadline below is past: the
    // engine's timer fires at once).
    const int64_t at = last_check_ns_ + interval;
    if ((!last_check_ns_ || now >= at) && !(known.ran_to_end && known.signalled)) return false;
    if (waiting_signal_) return false;
    auto it = queues_.find(handle);
    // Destroyed (its handle maybe already a new queue's): never looked at again.
    if (it == queues_.end() || it->second.queue.get() != &queue) return true;
    it->second.dirty = true;
    if (point > it->second.reached) it->second.reached = point;
    if (known.signalled && point > it->second.signalled) it->second.signalled = point;
    HealthPacer::process().note_busy(now, &it->second.busy_window);
    if (!due_ns_ || at < due_ns_) {
      new_deadline = true;
      due_ns_ = at;
      publish_deadline_locked();
    }
  }
  // The engine sleeps without this deadline: it must take it into its wait (about once per
  // interval, not once per completion: later completions find it set).
  if (new_deadline) rearm_();
  return true;
}

void QueueHealth::reset_elsewhere() {
  {
    std::lock_guard lk(mu_);
    bool marked = false;
    for (auto &[h, t] : queues_) {
      if (t.queue->status().lost) continue;
      mark_locked(t);
      marked = true;
    }
    if (!marked) return;  // nothing to look at: no check, and the notice is not kept
    reset_told_ = true;
    file_check_locked(monotonic_ns());
  }
  rearm_();  // the engine may be asleep without this deadline
}

void QueueHealth::on_deadline_moved(std::function<void()> moved) {
  std::lock_guard lk(mu_);
  moved_ = std::move(moved);
}

void QueueHealth::publish_deadline_locked() {
  // While a check is filed (due_ns_: the end of the pacing interval, or now), a look or a user
  // poll due before it could only be deferred to it; published, such a deadline would stay in
  // the past after its tick, which engines serve on their safety net (found by an audit).
  int64_t d = due_ns_;
  if (!d)
    for (const int64_t other : {next_user_poll_ns_, reset_expect_at_, quiet_look_at_})
      if (other && (!d || other < d)) d = other;
  if (deadline_.exchange(d, std::memory_order_acq_rel) != d && moved_) moved_();
}

int64_t QueueHealth::deadline_ns() {
  return deadline_.load(std::memory_order_acquire);
}

void QueueHealth::tick(int64_t now) {
  {
    std::lock_guard lk(mu_);
    if (next_user_poll_ns_ && now >= next_user_poll_ns_) {
      for (auto &[h, t] : users_)
        t.dirty = true;
      next_user_poll_ns_ =
          now + user_poll_interval_ns(g_user_queues.load(std::memory_order_relaxed));
      publish_deadline_locked();
    }
    if (!check_due_locked(now, false)) return;
  }
  check(now);
}

bool QueueHealth::check_due_locked(int64_t now, bool dirty) {
  // A completion just marked its queue; a tick looks for any mark, or an expected reset's look.
  if (look_due_locked(now)) dirty = true;
  for (auto it = queues_.begin(); !dirty && it != queues_.end(); ++it)
    dirty = it->second.dirty;
  for (auto it = users_.begin(); !dirty && it != users_.end(); ++it)
    dirty = it->second.dirty;
  if (!dirty) {
    due_ns_ = 0;
    publish_deadline_locked();
    return false;
  }
  const int64_t interval = HealthPacer::process().interval_ns(now);
  if (last_check_ns_ && now - last_check_ns_ < interval) {
    // Deferred, not dropped: the engine calls tick() at the deadline (publishing files it with
    // the engine, and this runs on its thread before it sleeps, so no rearm is needed).
    due_ns_ = last_check_ns_ + interval;
    publish_deadline_locked();
    return false;
  }
  return true;
}

void QueueHealth::post(uint32_t type, uint32_t queue, uint64_t p0, uint64_t p1) {
  events_.post(type, queue, p0, p1);
}

void QueueHealth::post_fault(uint32_t queue, const rvgl_drm_amdgpu_info_gpuvm_fault &f) {
  post(RVGL_EVENT_VM_FAULT, queue, f.addr, f.status | (uint64_t{f.vmhub} << 32));
}

bool QueueHealth::peek_new_fault(rvgl_drm_amdgpu_info_gpuvm_fault *f) {
  if (dev_->query_gpuvm_fault(f)) return false;
  if (f->status && !same_fault(*f, last_fault_)) return true;
  ++cache_told_;  // nothing new: every fault recorded before this read has been dealt with
  return false;
}

bool QueueHealth::take_new_fault(rvgl_drm_amdgpu_info_gpuvm_fault *f) {
  if (!peek_new_fault(f)) return false;
  took_fault(*f);
  return true;
}

void QueueHealth::took_fault(const rvgl_drm_amdgpu_info_gpuvm_fault &f) {
  last_fault_ = f;
  ++cache_told_;  // dealt with: what the cache held is this look's to post
}

ResetProbe::Answer QueueHealth::ask_probe(std::vector<Seen> &seen, bool *news,
                                          uint64_t *last_reset) {
  const ResetProbe::Answer a = probe_.ask();
  {
    std::lock_guard lk(mu_);
    ++probe_asks_;
    if (a != ResetProbe::Answer::kNoReset) {
      probe_last_reset_ = probe_asks_;  // unknown: a reset
      verify_after_reset_locked(seen, a == ResetProbe::Answer::kReset);
    }
    *news |= a == ResetProbe::Answer::kReset && !reset_told_;
    reset_told_ = false;
    *last_reset = probe_last_reset_;
  }
  verify_jobs(seen);
  return a;
}

bool QueueHealth::reset_while_checking(const std::vector<Seen> &seen, uint64_t last_reset) {
  for (const Seen &s : seen) {
    if (s.before.lost || !s.ctx_read || s.job_error || last_reset >= s.resets_shown_from) continue;
    if ((s.ctx_flags & AMDGPU_CTX_QUERY2_FLAGS_RESET) &&
        !(s.before.flags & RVGL_QUEUE_FLAG_INNOCENT))
      return true;
    if ((s.ctx_flags & AMDGPU_CTX_QUERY2_FLAGS_VRAMLOST) &&
        !(s.before.flags & RVGL_QUEUE_FLAG_VRAM_LOST))
      return true;
  }
  return false;
}

ResetProbe::Answer QueueHealth::read_ctx_states(std::vector<Seen> &seen, bool none_failed,
                                                bool probe_anyway, bool *news) {
  *news = false;
  size_t live = 0;
  for (const Seen &s : seen)
    live += !s.before.lost;
  if (!live && !probe_anyway) return ResetProbe::Answer::kNoReset;  // not asked
  // Asked after the job errors, as each context would be. Also when a job failed, which sends
  // every queue of `seen` to its own context anyway: a reset that came with the failure is news
  // for the context's other queues and for other contexts.
  uint64_t last_reset = 0;
  ResetProbe::Answer a = ask_probe(seen, news, &last_reset);
  const auto read_contexts = [&](bool all) {
    for (Seen &s : seen) {
      if (s.before.lost) continue;
      // The probe speaks for a context only while no reset was seen since that context was last
      // read, and only where the error read was that of the newest job itself (a guilty
      // context's later jobs fail too, so it would show): a refusal, or a newest job whose
      // fence was not recorded yet, leaves the context to be asked.
      if (!all && none_failed && !s.refused && s.job_known && last_reset < s.ctx_stale_from)
        continue;
      s.ctx_read = false;
      if (s.q->ctx_flags(&s.ctx_flags))
        s.unread = true;
      else
        s.ctx_read = true;
    }
  };
  read_contexts(false);
  // A reset the probe did not report, yet a context shows: the device was reset after the probe
  // was asked, while this check ran. A soft recovery is counted after its killed job's fence
  // signalled, and that job wrote its user fence as one that ran to its end, so no job of this
  // look was asked about it: its queue would pass for an innocent one. The probe is asked again;
  // if it reports the reset, every job up to then is verified and every context read after that
  // answer. With the answer a reset, the look is consistent: any job a later reset ended and
  // this look classifies was signalled, so its error was there when it was verified.
  if (a == ResetProbe::Answer::kNoReset && reset_while_checking(seen, last_reset)) {
    a = ask_probe(seen, news, &last_reset);
    if (a != ResetProbe::Answer::kNoReset) read_contexts(true);
  }
  return a;
}

bool QueueHealth::look_due_locked(int64_t now) const {
  // A reset notice whose queues went before their check (QUEUE_DESTROY) still has the probe
  // asked: until it is, reset_told_ would make the next reset it reports no news.
  return reset_told_ || (reset_expect_at_ && now >= reset_expect_at_) ||
         (quiet_look_at_ && now >= quiet_look_at_);
}

void QueueHealth::mark_locked(Tracked &t) {
  if (waiting_signal_ && !t.dirty)
    t.held = true;
  else
    t.dirty = true;
}

void QueueHealth::release_held_locked(int64_t now) {
  if (waiting_signal_) return;
  bool any = false;
  for (auto &[h, t] : queues_) {
    if (!t.held) continue;
    t.held = false;
    t.dirty = true;
    any = true;
  }
  // Checks run on the engine thread, which takes the deadline into its sleep after this call.
  if (any) file_check_locked(now);
}

void QueueHealth::file_check_locked(int64_t now) {
  if (check_due_locked(now, true)) {
    due_ns_ = now;
    publish_deadline_locked();
  }
}

void QueueHealth::expect_reset_locked(int64_t now, ResetProbe::Answer answer, bool hang,
                                      bool follow_up, bool trusted) {
  // kUnknown (no probe): every check counts as a reset already, and there is nothing to ask.
  if (answer != ResetProbe::Answer::kNoReset) {
    reset_expect_at_ = 0;
    quiet_look_at_ = 0;
    publish_deadline_locked();
    return;
  }
  if (hang) {
    reset_expect_looks_ = 0;
    reset_expect_at_ = now + HealthPacer::process().interval_ns(now);
  } else if (follow_up) {
    // A reset that has not come by the last look is left to the next check a completion brings
    // (e.g. the emulator's failed jobs, which it does not count as resets).
    if (++reset_expect_looks_ >= kResetExpectLooks)
      reset_expect_at_ = 0;
    else
      reset_expect_at_ = now + (HealthPacer::process().interval_ns(now) << reset_expect_looks_);
  }
  // A hang's follow-up looks go on longer than a quiet look would wait: they stand for it.
  if (reset_expect_at_)
    quiet_look_at_ = 0;
  else if (trusted)
    quiet_look_at_ = now + kQuietLookNs;
  else if (quiet_look_at_ && now >= quiet_look_at_)
    quiet_look_at_ = 0;  // this check was the quiet look
  publish_deadline_locked();
}

void QueueHealth::verify_after_reset_locked(std::vector<Seen> &seen, bool mark) {
  for (Seen &s : seen)
    s.verify_to = std::max(s.verify_to, s.q->last_submitted());
  bool marked = false;
  for (auto &[h, t] : queues_) {
    t.verify_to = std::max(t.verify_to, t.queue->last_submitted());
    const bool in_seen =
        std::any_of(seen.begin(), seen.end(), [&, h = h](const Seen &s) { return s.handle == h; });
    // The mainline kernel counts a soft recovery only after the killed job's fence signalled,
    // so a check may have trusted that job's user fence just before: its queue is looked at
    // again now, with no new work needed; so is every other, which hears of the reset at once.
    if (mark && !in_seen && !t.queue->status().lost) {
      t.dirty = true;
      marked = true;
    }
  }
  if (marked) {
    [[maybe_unused]] const bool due = check_due_locked(last_check_ns_, true);  // files it
  }
}

void QueueHealth::verify_jobs(std::vector<Seen> &seen) {
  for (Seen &s : seen) {
    if (s.before.lost || s.job_error) continue;
    const uint64_t upto = std::min(s.reached, s.verify_to);
    if (upto <= s.verified_to) continue;
    bool unread = false, shared = false;
    s.job_error = s.q->first_error_between(s.verified_to, upto, &s.failed_seq, &unread, &shared);
    s.shared_error = s.job_error && shared;
    if (unread)
      s.unread = true;  // asked again from the same job by the next look
    else
      s.verified_to = upto;
  }
}

void QueueHealth::check(int64_t now) {
  // Counted once it is over and check_mu_ is released (destroyed after `running`): a test that
  // sees the count may take the next step with no check under way.
  struct Count {
    QueueHealth &h;
    int64_t now;
    ~Count() {
      std::lock_guard lk(h.mu_);
      ++h.checks_;
      h.release_held_locked(now);
    }
  } count{*this, now};
  std::lock_guard running(check_mu_);  // the whole check, published states included
  bool follow_up = false;              // a hang's follow-up look is due
  bool look = false;              // that, or a quiet look: the probe is asked whatever is marked
  bool queues_looked_at = false;  // something was marked: a check of queues, not the probe alone
  std::vector<Seen> seen;
  std::vector<std::pair<uint32_t, std::shared_ptr<UserQueue>>> users;
  std::vector<const Seen *> given_up;
  {
    std::lock_guard lk(mu_);
    // All the check allocates, before it takes a mark: out of memory, it throws having changed
    // nothing but the deadline, filed for now so the engine's next pass tries again. A check
    // that follows its completion's delivery (the job ran to its end) is not called again for
    // that completion, and its marks must not wait for the next one, which may never come.
    try {
      seen.reserve(queues_.size());
      given_up.reserve(queues_.size());
      users.reserve(users_.size());
    } catch (const std::bad_alloc &) {
      due_ns_ = now;
      publish_deadline_locked();
      throw;
    }
    for (auto &[h, t] : queues_) {
      if (!t.dirty) continue;
      t.dirty = false;
      Seen s{h, t.queue, {}, t.reached, t.signalled};
      s.refused = std::exchange(t.refused, false);
      s.ctx_stale_from = t.ctx_stale_from;
      s.resets_shown_from = t.resets_shown_from;
      s.verify_to = t.verify_to;
      s.verified_to = t.verified_to;
      seen.push_back(std::move(s));
    }
    for (auto &[h, t] : users_) {
      if (!t.dirty) continue;
      t.dirty = false;
      users.emplace_back(h, t.queue);
    }
    follow_up = reset_expect_at_ && now >= reset_expect_at_;
    look = look_due_locked(now);
    queues_looked_at = !seen.empty() || !users.empty();
    // The interval paces looks at queues; a look that asks the probe alone keeps its own
    // schedule and leaves the next completion's check due as it was.
    if (queues_looked_at) last_check_ns_ = now;
    due_ns_ = 0;
    waiting_signal_ = false;  // postpone() sets it again if the kernel still has not signalled
    publish_deadline_locked();
  }
  // With nothing marked, a look for a reset a recovery has yet to count asks the probe alone:
  // the fault cache is read only with the queues whose work it may concern.
  if (!queues_looked_at && !look) return;

  // One observation, in the kernel's order of events: a failed job's fence carries its error
  // after its context was marked, so the errors are read first and the context states after
  // them; the VM's fault cache (written when the fault happened, before either) last.
  for (Seen &s : seen) {
    s.before = s.q->status();
    if (s.before.lost) continue;
    s.reached = std::max(s.reached, s.q->timeline()->known_reached());
  }
  // The GPU writes a job's user fence before the kernel's interrupt handler records the job's VM
  // faults and signals its fence: a check in between would miss the fault, and the next one
  // would blame another queue for it. A point known only from the user fence (made known ahead
  // of its deferred check) waits for the kernel's signal, the whole check with it.
  if (!all_signalled(seen)) {
    postpone(seen, users, now);
    return;
  }
  for (Seen &s : seen)
    if (!s.before.lost) s.job_known = s.q->knows_job(s.reached);
  bool none_failed = true;
  for (Seen &s : seen) {
    if (s.before.lost) continue;  // classified once: a lost queue stays as it was published
    // A job that wrote its user fence ran to its end, and such a job's fence carries no error
    // (the kernel sets one only on a job that hung, was cancelled or never ran); the kernel is
    // asked about the others.
    uint64_t job = 0;
    bool unread = false, shared = false;
    if (!s.q->finished(s.reached)) s.job_error = s.q->job_error(s.reached, &job, &unread, &shared);
    if (unread) {
      // Not known to be clean: the probe does not answer for its context.
      s.unread = true;
      none_failed = false;
      continue;
    }
    if (!s.job_error) continue;
    none_failed = false;
    s.failed_seq = job;
    s.shared_error = shared;
    // The cause is the queue's first failed job, not its newest: after a timeout the kernel
    // gives the hung job -ETIME and cancels its context's later jobs (-ECANCELED: a guilty
    // context's work in drm_sched_entity_pop_job(), the guilty context's fences in a per-ring
    // reset). Rare (a queue is lost once), so its recent jobs before that one are asked one by
    // one.
    uint64_t first = 0;
    if (const int e = s.q->first_error_between(0, job - 1, &first, &unread, &shared)) {
      s.job_error = e;
      s.failed_seq = first;
      s.shared_error = shared;
    }
    if (unread) s.unread = true;  // the first failure, the cause, is not known yet
  }
  bool reset_news = false;
  const ResetProbe::Answer answer = read_ctx_states(seen, none_failed, look, &reset_news);
  // Marked guilty with no failed job seen: the kernel's timeout handler marks the context before
  // the reset and signals the hung job (-ETIME) and those behind it only after it. A queue with
  // work not yet signalled is classified by the check that signal brings, from the job's error;
  // now it would be a guilty reset without its hang (a check another context's reset notice or
  // quiet look brought in between did that). Decided once, from this look's reads.
  for (Seen &s : seen)
    s.awaits_signal = !s.before.lost && !s.unread &&
                      (s.ctx_flags & AMDGPU_CTX_QUERY2_FLAGS_GUILTY) && !s.job_error &&
                      s.q->last_submitted() > s.reached;
  // A queue not read, or left for a later check, may be the one a fault belongs to: the fault
  // cache is left for the look that classifies it (it keeps the fault until a newer one). Taken
  // now, the fault would have gone with the queue left alone, and that look found it not new.
  const bool any_unread =
      std::any_of(seen.begin(), seen.end(), [](const Seen &s) { return s.unread; });
  const bool any_awaiting =
      std::any_of(seen.begin(), seen.end(), [](const Seen &s) { return s.awaits_signal; });
  // Who could have made a fault in the cache, decided before it is taken: with vm_fault_stop=2
  // a halted job fails only when the kernel's timeout handler ends it, the fault in the cache all
  // that while, and a look at other queues meanwhile must not take it.
  Seen *only_failed = nullptr, *only_live = nullptr;
  size_t failed = 0, live = 0;
  for (Seen &s : seen) {
    if (s.before.lost) continue;
    ++live, only_live = &s;
    if (s.job_error && s.job_error != -ECANCELED) ++failed, only_failed = &s;
  }
  rvgl_drm_amdgpu_info_gpuvm_fault fault{};
  bool new_fault = queues_looked_at && !any_unread && !any_awaiting && peek_new_fault(&fault);
  // Both rules below depend on the kernel's fault mode: the module parameter's file is read once,
  // and only for a new fault (no allocation: kernel_params.cpp).
  const bool stop_mode = new_fault && read_vm_fault_mode() == VmFaultMode::kStop;
  // Where a faulting job fails (vm_fault_stop=2), a look with no failed job did not make the
  // fault: it is left in the cache for the look of the queue that may have, one with work in
  // flight (a submission under way included: the job may run and fault before the CS returns),
  // or completions marked since this look took its queues (its failure among them); that look
  // comes anyway. Asked after the fault was read, so whatever made it was submitted by then, and
  // only then: walks of the context's queues.
  // A queue of this look still in submit() may be the one whose completion brought the look (the
  // GPU ran the job before the CS returned): then no later completion brings the look the fault
  // waits for, so the look's queues are looked at once more, after the pacing interval.
  bool look_after_submit = false;
  if (stop_mode && failed == 0 &&
      (std::any_of(seen.begin(), seen.end(),
                   [](const Seen &s) { return !s.before.lost && s.q->work_past(s.reached); }) ||
       queues_may_have(seen, true))) {
    new_fault = false;
    look_after_submit = std::any_of(seen.begin(), seen.end(), [](const Seen &s) {
      return !s.before.lost && s.q->submitting();
    });
  }
  if (new_fault) took_fault(fault);

  // A fault is a queue's only when no other queue of the look can have made it: the fault cache
  // names no ring. Where the kernel stops a faulting job (vm_fault_stop=2) the job fails, so it
  // is the kernel queue whose job failed, if one alone did, and never one whose jobs all ran to
  // their end (a fault of a destroyed queue's halted job, which no look takes, is nobody's); a
  // cancelled job never ran (the scheduler skips a job whose fence it cancelled:
  // drm_sched_entity_pop_job(), amdgpu_job_run()). Otherwise (the kernel's default drops the
  // access and the job goes on, so a failure of another cause proves nothing) it is the only
  // kernel queue of the look. A user queue stops on its fault in either mode (the kernel reports
  // it hung), so it is one only when it was the only queue looked at. A queue lost before this
  // look completes nothing new (a cancelled job's signal, a refused submission): it is none of
  // these. In either mode each holds only while nothing else may have made the fault
  // (others_may_have()): no other kernel queue, destroyed ones whose jobs may still run and lost
  // ones included, has work the GPU may be running or has run since its last look, and no user
  // queue outside the look is live. In the default mode the kernel records a fault when the
  // fault's interrupt comes, while its job goes on; in stop mode another queue's job may be
  // halted at it, to fail only at its timeout (asked after the fault was read, so a job that made
  // it was submitted by then). Left for a later look, such a fault could go nowhere better in the
  // default mode: a job that made it ends like any other, and that look would give it to
  // whichever queue completed.
  Seen *fault_owner = nullptr;
  uint32_t fault_queue = RVGL_EVENT_QUEUE_NONE;  // a user queue's handle, when it is theirs
  if (new_fault) {
    // In stop mode a look with no failed job has left the fault above while others were busy.
    // With one that failed, a job of another queue halted at the fault (it fails only at its
    // timeout) may have made it: one of the look's with work past what it reached, too.
    bool others = others_may_have(seen, users, stop_mode);
    if (stop_mode && failed == 1 && !others)
      others = std::any_of(seen.begin(), seen.end(), [&](const Seen &s) {
        return &s != only_failed && !s.before.lost && s.q->work_past(s.reached);
      });
    if (stop_mode && failed == 1 && !others)
      fault_owner = only_failed;
    else if (!stop_mode && !others && live == 1 && users.empty())
      fault_owner = only_live;
    else if (!others && live == 0 && users.size() == 1)
      fault_queue = users[0].first;
    // Nobody can tell whose it is: posted once, before any queue of the look is published lost.
    if (!fault_owner && fault_queue == RVGL_EVENT_QUEUE_NONE)
      post_fault(RVGL_EVENT_QUEUE_NONE, fault);
  }
  check_users(users, fault_queue, fault);

  bool hang = false;  // classified now: its recovery may count the reset only later
  bool look_again = false;
  for (Seen &s : seen) {
    if (s.before.lost) continue;
    // One observation or none: with any queue unread (its failure, or a fault that is its, may
    // be what the others' records would be made of) every queue is looked at again.
    if (any_unread) {
      const Unread u = unread_look(s, now);
      look_again |= u == Unread::kLookAgain;
      if (u == Unread::kGaveUp) given_up.push_back(&s);
      continue;
    }
    if (s.awaits_signal) continue;
    KernelQueue::Status st = s.before;
    uint32_t flags = 0;
    // Linux 6.5+, where every job of a context answers its last one's error (shared_error): a
    // GUILTY context's failed job is the one the timeout handler blamed, whose own error it set
    // to -ETIME (amdgpu_job_timedout()), whatever later job of it the answer came from.
    const bool blamed =
        s.shared_error && s.job_error && (s.ctx_flags & AMDGPU_CTX_QUERY2_FLAGS_GUILTY);
    const int job_error = blamed ? -ETIME : s.job_error;
    bool lost = job_error != 0;
    // Past its timeout, whether the GPU or the ring was reset (-ETIME) or its waves were killed
    // (-ENODATA).
    const bool timed_out = job_error == -ETIME || job_error == -ENODATA;
    // Another context's hang reset the GPU under us (or was soft-recovered: the kernel counts
    // that as a reset too). A job of our own that timed out moved the counter itself, with
    // nothing marked guilty when the kernel killed its waves (soft recovery) or reset only its
    // ring (amdgpu_ring_reset()): that is this queue's hang, not an innocent reset. So while a
    // job the queue had submitted when the reset was seen (verify_to) is past what this look
    // reached, the reset may be that job's own (it signalled, then the reset was counted, after
    // this look took its progress): the check its completion brings classifies it, verified,
    // and reads its context again (this read is not recorded as current).
    const bool reset = (s.ctx_flags & AMDGPU_CTX_QUERY2_FLAGS_RESET) && !timed_out;
    const bool innocent_later = reset && !job_error && s.reached < s.verify_to;
    if (s.ctx_flags & AMDGPU_CTX_QUERY2_FLAGS_GUILTY) {
      flags |= RVGL_QUEUE_FLAG_GUILTY;
      lost = true;
    } else if (reset && !innocent_later) {
      flags |= RVGL_QUEUE_FLAG_INNOCENT;
    }
    if (s.ctx_flags & AMDGPU_CTX_QUERY2_FLAGS_VRAMLOST) {
      flags |= RVGL_QUEUE_FLAG_VRAM_LOST;
      lost = true;
    }
    const bool faulted = &s == fault_owner;
    if (faulted) flags |= RVGL_QUEUE_FLAG_VM_FAULT;
    // A hang is a job past its timeout with no fault of its own.
    if (lost && timed_out && !faulted) flags |= RVGL_QUEUE_FLAG_HANG;
    const uint32_t fresh = flags & ~st.flags;
    const uint64_t done = std::max(s.reached, s.q->timeline()->known_reached());
    const VramLossCount vram_count =
        (fresh & RVGL_QUEUE_FLAG_VRAM_LOST) ? read_vram_loss_count() : VramLossCount{};

    // Posted and published under mu_. The queue is still there: remove() waits this check out
    // before it erases the queue (the lookups of the check's helpers rely on that too; their
    // misses are guards, not a path).
    std::lock_guard lk(mu_);
    auto it = queues_.find(s.handle);
    if (it == queues_.end() || it->second.queue != s.q) continue;
    it->second.unread_since = 0;
    it->second.looked = std::max(it->second.looked, s.reached);
    it->second.signalled = std::max(it->second.signalled, s.signalled);
    it->second.verified_to = std::max(it->second.verified_to, s.verified_to);
    if (faulted) post_fault(s.handle, fault);
    if (fresh & RVGL_QUEUE_FLAG_HANG) {
      post(RVGL_EVENT_QUEUE_HANG, s.handle, s.failed_seq, 0);
      hang = true;
    }
    const uint64_t vram = (fresh & RVGL_QUEUE_FLAG_VRAM_LOST) ? RVGL_EVENT_RESET_VRAM_LOST : 0;
    if (fresh & RVGL_QUEUE_FLAG_GUILTY)
      post(RVGL_EVENT_QUEUE_RESET, s.handle, RVGL_EVENT_RESET_GUILTY | vram, done);
    else if (fresh & (RVGL_QUEUE_FLAG_INNOCENT | RVGL_QUEUE_FLAG_VRAM_LOST))
      post(RVGL_EVENT_QUEUE_RESET, s.handle, RVGL_EVENT_RESET_INNOCENT | vram, done);
    if (vram && vram_loss_untold(vram_count))
      post(RVGL_EVENT_DEVICE_RESET, RVGL_EVENT_QUEUE_NONE, RVGL_EVENT_RESET_VRAM_LOST, 0);
    st.flags |= flags;
    if (lost) {
      st.lost = true;
      st.error = job_error ? job_error : -ECANCELED;
    }
    // Read after the newest probe answer: only a later answer's reset can make it stale.
    if (s.ctx_read && !innocent_later)
      it->second.ctx_stale_from = it->second.resets_shown_from = probe_asks_ + 1;
    s.q->publish(st);  // after its records: a guest that sees it lost finds them in the ring
  }
  if (queues_looked_at) events_.notify();
  // Whatever this check did not ask the kernel about (a job that wrote its user fence, the jobs
  // before the one whose error it read) was vouched for by its probe.
  const bool trusted =
      std::any_of(seen.begin(), seen.end(), [](const Seen &s) { return !s.before.lost; });
  {
    std::lock_guard lk(mu_);
    expect_reset_locked(now, answer, hang, follow_up, trusted);
    if (look_after_submit) {
      for (const Seen &s : seen) {
        auto it = queues_.find(s.handle);
        if (it == queues_.end() || it->second.queue != s.q || s.before.lost) continue;
        mark_locked(it->second);
        look_again = true;
      }
    }
    if (look_again) {
      [[maybe_unused]] const bool due = check_due_locked(now, true);  // files the deadline
    }
  }
  if (!given_up.empty()) {
    // A queue of this look whose job failed may own the fault in the cache: the next look, which
    // classifies it, reads the cache then. Otherwise nothing will.
    const bool failed = std::any_of(seen.begin(), seen.end(),
                                    [](const Seen &s) { return !s.before.lost && s.job_error; });
    give_up(given_up, /*fault_unowned=*/!failed);
  }
  if (reset_news) ResetNotices::process().tell_others(this);
}

QueueHealth::Unread QueueHealth::unread_look(const Seen &s, int64_t now) {
  std::lock_guard lk(mu_);
  auto it = queues_.find(s.handle);
  if (it == queues_.end() || it->second.queue != s.q) return Unread::kGone;
  Tracked &t = it->second;
  t.signalled = std::max(t.signalled, s.signalled);
  t.refused |= s.refused;             // taken by this look, which classified nothing
  if (!s.unread) t.unread_since = 0;  // read this time: another queue was not
  if (s.unread && !t.unread_since) t.unread_since = now;
  if (!s.unread || now - t.unread_since < kUnreadGiveUpNs) {
    t.dirty = true;
    return Unread::kLookAgain;
  }
  return Unread::kGaveUp;
}

void QueueHealth::give_up(const std::vector<const Seen *> &queues, bool fault_unowned) {
  // The looks that could not read them left the fault cache unread: a fault there may be theirs,
  // and must not be pinned on the next queue to complete work. Posted once, for no queue, and
  // before they are published lost (a guest that sees one lost finds the record in the ring).
  rvgl_drm_amdgpu_info_gpuvm_fault f{};
  const bool fault = fault_unowned && take_new_fault(&f);
  std::lock_guard lk(mu_);
  if (fault) post_fault(RVGL_EVENT_QUEUE_NONE, f);
  for (const Seen *s : queues) {
    auto it = queues_.find(s->handle);
    if (it == queues_.end() || it->second.queue != s->q) continue;  // guard (see check())
    // The kernel keeps refusing to say whether its work ran: its results cannot be trusted, so it
    // is lost (no record: there is no cause to name). Its next submit is refused.
    KernelQueue::Status st = s->before;
    st.lost = true;
    st.error = -EIO;
    s->q->publish(st);
  }
  events_.notify();
}

void QueueHealth::prune_gone_locked() {
  // A destroyed queue's context keeps it while its jobs run (ComputeContext::draining_). Once
  // that lets it go, or it is idle, its work makes no new fault; one it made may still be in
  // the cache until a look has dealt with what the cache held after that (cache_told_ moved on).
  // The reference taken here is the last one only when the context let the queue go meanwhile,
  // which it does once the queue is idle: freeing an idle queue's kernel context does not wait.
  std::erase_if(gone_, [this](Gone &g) {
    if (const std::shared_ptr<KernelQueue> q = g.queue.lock(); q && !q->idle()) return false;
    if (!g.done_at) {
      g.done_at = cache_told_ + 1;
      return false;
    }
    return cache_told_ >= g.done_at;
  });
}

bool QueueHealth::queues_may_have(const std::vector<Seen> &seen, bool stop_mode) const {
  for (const Seen &s : seen)
    if (s.before.lost && may_have_faulted(*s.q, s.reached, false, true, stop_mode)) return true;
  std::lock_guard lk(mu_);
  for (const auto &[h, t] : queues_) {
    // seen was taken from queues_ in handle order.
    const auto in =
        std::lower_bound(seen.begin(), seen.end(), h,
                         [](const Seen &s, uint32_t handle) { return s.handle < handle; });
    if (in != seen.end() && in->handle == h) continue;
    const bool lost = t.queue->status().lost;
    if (may_have_faulted(*t.queue, t.reached, !lost && (t.dirty || t.held), lost, stop_mode))
      return true;
  }
  return false;
}

bool QueueHealth::others_may_have(
    const std::vector<Seen> &seen,
    const std::vector<std::pair<uint32_t, std::shared_ptr<UserQueue>>> &users, bool stop_mode) {
  if (queues_may_have(seen, stop_mode)) return true;
  std::lock_guard lk(mu_);
  if (gone_untracked_) return true;
  prune_gone_locked();
  if (!gone_.empty()) return true;
  for (const auto &entry : users_) {
    const uint32_t handle = entry.first;
    const std::shared_ptr<UserQueue> &queue = entry.second.queue;
    if (queue->status().lost) continue;
    // Structured bindings are not captured: clang 14 does not allow it.
    const bool taken = std::any_of(users.begin(), users.end(), [&](const auto &l) {
      return l.first == handle && l.second == queue;
    });
    if (!taken) return true;
  }
  return false;
}

bool QueueHealth::all_signalled(std::vector<Seen> &seen) {
  bool all = true;
  for (Seen &s : seen) {
    if (s.before.lost || s.reached <= s.signalled) continue;
    uint64_t kernel = 0;
    // A query that fails says nothing; the check goes on rather than wait forever on a device
    // that answers no more.
    if (s.q->timeline()->query(&kernel)) continue;
    s.signalled = kernel;
    if (kernel < s.reached) all = false;
  }
  return all;
}

void QueueHealth::postpone(
    const std::vector<Seen> &seen,
    const std::vector<std::pair<uint32_t, std::shared_ptr<UserQueue>>> &users, int64_t now) {
  std::lock_guard lk(mu_);
  for (const Seen &s : seen) {
    auto it = queues_.find(s.handle);
    if (it == queues_.end() || it->second.queue != s.q) continue;  // guard (see check())
    Tracked &t = it->second;
    t.dirty = true;
    t.refused = t.refused || s.refused;
    t.signalled = std::max(t.signalled, s.signalled);
  }
  for (const auto &[h, q] : users) {
    auto it = users_.find(h);
    if (it != users_.end() && it->second.queue == q) it->second.dirty = true;
  }
  waiting_signal_ = true;
  // Deferred as any check within its interval is (this one's start is the last check), which
  // files the deadline.
  [[maybe_unused]] const bool due = check_due_locked(now, true);
}

void QueueHealth::check_users(std::vector<std::pair<uint32_t, std::shared_ptr<UserQueue>>> &users,
                              uint32_t fault_queue, const rvgl_drm_amdgpu_info_gpuvm_fault &fault) {
  // A user queue that faulted stops (the kernel reports it hung: mes_userq_detect_and_reset(),
  // amdgpu_userq_hang_detect_work()); the fault itself is only in the VM's fault cache, and
  // check() gives it to a user queue only when it was the only queue looked at.
  for (auto &[handle, q] : users) {
    UserQueue::Status st = q->status();
    if (st.lost && handle != fault_queue) continue;
    const UserQueue::Observation o = q->observe();  // -EINVAL: a kernel without QUERY_STATUS
    uint32_t flags = 0;
    if (o.queue_flags & RVGL_AMDGPU_USERQ_QUERY_STATUS_FLAGS_HUNG) flags |= RVGL_QUEUE_FLAG_HANG;
    if (o.queue_flags & RVGL_AMDGPU_USERQ_QUERY_STATUS_FLAGS_VRAMLOST)
      flags |= RVGL_QUEUE_FLAG_VRAM_LOST;
    if (handle == fault_queue) flags |= RVGL_QUEUE_FLAG_VM_FAULT;
    const uint32_t fresh = flags & ~st.flags;
    std::lock_guard lk(mu_);
    auto it = users_.find(handle);
    if (it == users_.end() || it->second.queue != q) continue;
    if (handle == fault_queue) post_fault(handle, fault);
    if (fresh & RVGL_QUEUE_FLAG_HANG) post(RVGL_EVENT_QUEUE_HANG, handle, 0, 0);
    if (fresh & RVGL_QUEUE_FLAG_VRAM_LOST)
      post(RVGL_EVENT_QUEUE_RESET, handle, RVGL_EVENT_RESET_INNOCENT | RVGL_EVENT_RESET_VRAM_LOST,
           0);
    st.flags |= flags;
    if (flags & (RVGL_QUEUE_FLAG_HANG | RVGL_QUEUE_FLAG_VRAM_LOST)) {
      if (!st.lost) st.error = (flags & RVGL_QUEUE_FLAG_HANG) ? -ETIME : -ECANCELED;
      st.lost = true;
    }
    q->publish(st);
  }
}

QueueHealth::VramLossCount QueueHealth::read_vram_loss_count() const {
  // The device's count of VRAM losses (amdgpu_info_ioctl(): AMDGPU_INFO_VRAM_LOST_COUNTER reads
  // adev->vram_lost_counter), which a queue's VRAMLOST flag compares with its context's copy.
  VramLossCount c;
  c.known = dev_->query_info(AMDGPU_INFO_VRAM_LOST_COUNTER, &c.value, sizeof(c.value)) == 0;
  return c;
}

bool QueueHealth::vram_loss_untold(const VramLossCount &now) {
  if (!vram_loss_told_) {
    vram_loss_told_ = true;
    vram_loss_last_ = now;
    return true;
  }
  // Without a count to compare, a second loss cannot be told from the one told: none is posted.
  if (!now.known) return false;
  if (!vram_loss_last_.known) {
    vram_loss_last_ = now;  // the loss told had no count: taken as this one
    return false;
  }
  if (now.value == vram_loss_last_.value) return false;
  vram_loss_last_ = now;
  return true;
}

uint64_t QueueHealth::checks() const {
  std::lock_guard lk(mu_);
  return checks_;
}

bool QueueHealth::settled() const {
  std::unique_lock no_check(check_mu_, std::try_to_lock);
  if (!no_check.owns_lock()) return false;
  std::lock_guard lk(mu_);
  return std::none_of(queues_.begin(), queues_.end(),
                      [](const auto &q) { return q.second.dirty || q.second.held; });
}

}  // namespace rvgl
