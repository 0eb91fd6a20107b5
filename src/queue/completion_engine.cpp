#include "queue/completion_engine.h"

#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <new>
#include <system_error>
#include <vector>

#include "util/monotonic_clock.h"

namespace rvgl {

namespace {

// Only a safety net: every wakeup that matters comes from a signalled point or a rearm().
constexpr int64_t kSafetyNetNs = 250'000'000;
// While the kernel refuses to register or wait for a point, the thread asks for it this often:
// never a spin on a broken device, and a completion still seen within about this.
constexpr int kRefusedPollMs = 1;

std::mutex g_engine_mu;
std::weak_ptr<CompletionEngine> g_engine;
std::atomic<int> g_threads{0};

}  // namespace

std::shared_ptr<CompletionEngine> CompletionEngine::acquire(const AmdgpuDevice &dev, int *err) {
  std::lock_guard lk(g_engine_mu);
  if (auto e = g_engine.lock()) {
    *err = 0;
    return e;
  }
  auto own = dev.reopen(err);
  if (!own) return nullptr;
  std::shared_ptr<CompletionEngine> e(new CompletionEngine(std::move(own)));
  if ((*err = e->start())) return nullptr;
  g_engine = e;
  return e;
}

bool CompletionEngine::probe_eventfd() {
  // The kernel answers an unknown DRM ioctl with an error; a point far ahead never fires.
  UniqueFd probe(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!probe || dev_->syncobj_eventfd(wake_->handle(), uint64_t{1} << 62, probe.get()))
    return false;
  epoll_.reset(epoll_create1(EPOLL_CLOEXEC));
  wake_efd_.reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!epoll_ || !wake_efd_) return false;
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = 0;
  if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, wake_efd_.get(), &ev)) return false;
  // Deadlines through a timerfd in the same set: a deadline that another thread moves earlier
  // re-sets the timer (one system call, no wakeup) instead of waking this thread to shorten its
  // sleep. Edge-triggered: each expiry is an event, and settime clears the count, so it is never
  // read. Without one, rearm() does it as in wait mode.
  timer_fd_.reset(timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK));
  if (timer_fd_) {
    ev.events = EPOLLIN | EPOLLET;
    ev.data.u64 = kTimerEvent;
    if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, timer_fd_.get(), &ev)) timer_fd_.reset();
  }
  return true;
}

int CompletionEngine::start() {
  int err;
  wake_ = SyncTimeline::create(dev_, &err);
  if (!wake_) return err;
  use_eventfd_ = probe_eventfd();
  try {
    thread_ = std::thread([this] { run(); });
  } catch (const std::system_error &e) {
    // Thread exhaustion is an error code for the caller, never an exception through the C API.
    return e.code().value() ? -e.code().value() : -EAGAIN;
  } catch (...) {
    return -ENOMEM;
  }
  thread_id_ = thread_.get_id();
  g_threads.fetch_add(1, std::memory_order_relaxed);
  return 0;
}

CompletionEngine::~CompletionEngine() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  rearm();
  thread_.join();
  g_threads.fetch_sub(1, std::memory_order_relaxed);
  for (auto &[id, e] : entries_)
    if (e.handle) dev_->syncobj_destroy(e.handle);
}

int CompletionEngine::threads_running() {
  return g_threads.load(std::memory_order_relaxed);
}

int CompletionEngine::insert(uint32_t handle, Watch *w, uint64_t *id) {
  UniqueFd efd;
  if (use_eventfd_ && handle) {
    efd.reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!efd) {
      dev_->syncobj_destroy(handle);
      return -errno;
    }
  }
  try {
    std::lock_guard lk(mu_);
    // Out of memory, the tables are left as they were (the handle goes below): a watch half
    // filed would leave the imported syncobj without an owner, or a timer without its node.
    if (!handle) {
      std::lock_guard tl(timers_mu_);
      const auto t = timers_.try_emplace(next_id_).first;
      try {
        by_deadline_.emplace(t->second.at, next_id_);  // no deadline yet: the earliest stays
      } catch (const std::bad_alloc &) {
        timers_.erase(t);
        throw;
      }
      *id = next_id_++;
      t->second.watch = w;
      refile_locked(*id, t->second);
    } else {
      if (efd) grow_for(to_arm_, 1);
      const auto e = entries_.try_emplace(next_id_).first;
      if (efd) {
        // Edge-triggered: every signal of the eventfd is an event of its own, so the counter
        // never needs a read() to be re-armed (one syscall less per completion).
        epoll_event ev{};
        ev.events = EPOLLIN | EPOLLET;
        ev.data.u64 = next_id_;
        if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, efd.get(), &ev)) {
          const int err = -errno;
          entries_.erase(e);
          dev_->syncobj_destroy(handle);
          return err;
        }
        to_arm_.push_back(next_id_);
      }
      *id = next_id_++;
      e->second = Entry{handle, w, std::move(efd), 0};
    }
  } catch (const std::bad_alloc &) {
    if (handle) dev_->syncobj_destroy(handle);
    throw;
  }
  // The thread waits on the old set: it must take the new watch (or deadline) into its wait.
  rearm();
  return 0;
}

int CompletionEngine::add(const SyncTimeline &timeline, Watch *w, uint64_t *id) {
  uint32_t handle = 0;
  {
    // Closed before the watch's eventfd is made: a queue never holds two more descriptors at
    // once, which is what QUEUE_CREATE checks are left (handlers_queue.cpp).
    UniqueFd fd;
    if (int err = timeline.device()->syncobj_export(timeline.handle(), &fd)) return err;
    if (int err = dev_->syncobj_import(fd.get(), &handle)) return err;
  }
  return insert(handle, w, id);
}

int CompletionEngine::add_timer(Watch *w, uint64_t *id) {
  return insert(0, w, id);
}

void CompletionEngine::remove(uint64_t id) {
  uint32_t handle = 0;
  bool timer = false;
  {
    std::lock_guard tl(timers_mu_);
    if (auto it = timers_.find(id); it != timers_.end()) {
      by_deadline_.erase({it->second.at, id});
      timers_.erase(it);
      note_earliest_locked();
      timer = true;
    }
  }
  if (!timer) {
    std::lock_guard lk(mu_);
    auto it = entries_.find(id);
    if (it == entries_.end()) return;
    handle = it->second.handle;
    entries_.erase(it);  // a stale id left on to_arm_ is skipped there
  }
  // A call into the watch may be under way on the engine thread; wait it out (unless this is that
  // call, removing its own watch).
  if (std::this_thread::get_id() != thread_id_) std::lock_guard wait_out(calls_mu_);
  if (handle) {
    if (!use_eventfd_) rearm();  // the wait in progress still names the handle: let it drop it
    dev_->syncobj_destroy(handle);
  }
}

void CompletionEngine::rearm() {
  rearms_.fetch_add(1, std::memory_order_relaxed);
  if (use_eventfd_) {
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t n = write(wake_efd_.get(), &one, sizeof(one));
    return;
  }
  uint64_t point;
  {
    std::lock_guard lk(mu_);
    point = ++wake_point_;
  }
  wake_->signal(point);
}

size_t CompletionEngine::watch_count() const {
  size_t n;
  {
    std::lock_guard lk(mu_);
    n = entries_.size();
  }
  std::lock_guard tl(timers_mu_);
  return n + timers_.size();
}

CompletionEngine::Registrations CompletionEngine::registrations() const {
  std::lock_guard lk(mu_);
  return registrations_;
}

uint64_t CompletionEngine::wakeups() const {
  std::lock_guard lk(mu_);
  return wakeups_;
}

void CompletionEngine::refile_locked(uint64_t id, Timer &t) {
  const int64_t d = t.watch->deadline_ns();
  const int64_t at = d ? d : kNoDeadline;
  if (at == t.at) return;
  auto node = by_deadline_.extract({t.at, id});  // moved, not reallocated
  node.value().first = at;
  by_deadline_.insert(std::move(node));
  t.at = at;
  note_earliest_locked();
}

void CompletionEngine::deadline_moved(uint64_t id) {
  std::lock_guard tl(timers_mu_);
  if (auto it = timers_.find(id); it != timers_.end()) refile_locked(id, it->second);
}

bool CompletionEngine::set_timer(bool only_earlier) {
  if (!timer_fd_) return false;
  std::lock_guard tl(timers_mu_);
  const int64_t at = earliest_.load(std::memory_order_relaxed);
  // A one-shot timer that expired is disarmed already: no system call to disarm it again (at
  // worst it is still on its way, and one wakeup finds nothing due).
  const int64_t now = monotonic_ns();
  if (timer_expiry_ && timer_expiry_ <= now) timer_expiry_ = 0;
  // The same deadline is served only while the timer still runs for it: a watch whose tick left
  // its deadline where it was (due, its work deferred) is ticked again, not after the safety net.
  const bool pending = timer_expiry_ || at == kNoDeadline;
  if ((at == timer_at_ && pending) || (only_earlier && at > timer_at_)) return true;
  // Deadlines are rate-limited work (health checks), not promises to the µs: they expire on the
  // next whole millisecond, as the epoll timeout in milliseconds used to make them, so one
  // wakeup serves every deadline of that millisecond and a completion due about then. One that
  // has passed expires on the next one after now: never a timer that fires at once for ever.
  int64_t expiry = 0;  // disarmed
  if (at != kNoDeadline) {
    const int64_t from = at == timer_at_ ? std::max(at, now + 1) : std::max<int64_t>(at, 1);
    expiry = (from + 999'999) / 1'000'000 * 1'000'000;
  }
  if (expiry != timer_expiry_) {
    itimerspec its{};
    its.it_value.tv_sec = expiry / 1'000'000'000;
    its.it_value.tv_nsec = expiry % 1'000'000'000;
    if (timerfd_settime(timer_fd_.get(), TFD_TIMER_ABSTIME, &its, nullptr)) return false;
    timer_expiry_ = expiry;
  }
  timer_at_ = at;
  return true;
}

void CompletionEngine::deadline_earlier() {
  // The timer takes the earlier deadline, so the sleeping thread needs no wakeup to learn it;
  // without a timer (wait mode), or if the kernel refused to set it, the thread must be woken.
  if (set_timer(true)) return;
  rearm();
}

int64_t CompletionEngine::next_deadline(int64_t now) {
  return std::min(now + kSafetyNetNs, earliest_.load(std::memory_order_acquire));
}

void CompletionEngine::call_due(int64_t now) {
  // calls_mu_ held by the caller: watches are only removed after it is released.
  std::vector<std::pair<uint64_t, Watch *>> due;
  {
    std::lock_guard tl(timers_mu_);
    for (auto it = by_deadline_.begin(); it != by_deadline_.end() && it->first <= now; ++it)
      due.emplace_back(it->second, timers_.at(it->second).watch);
  }
  for (auto &[id, w] : due) {
    w->tick(now);
    // A tick moves its own deadline (a later one, or none); read it whether or not it said so.
    deadline_moved(id);
  }
}

void CompletionEngine::run() {
  // Named for the VMM's operators (top -H, perf sched): one thread per process, whatever it is.
  pthread_setname_np(pthread_self(), "rvgl-completion");
  for (;;) {
    try {
      if (use_eventfd_)
        run_eventfd();
      else
        run_wait();
      return;  // stopped
    } catch (const std::bad_alloc &) {
      // Out of memory in a pass (its lists, a health check's): the thread goes on a millisecond
      // later rather than end the VMM (std::terminate). A report the pass dropped is not lost:
      // its watch is on to_arm_ again, and arming finds a point already reached.
      usleep(1000);
    }
  }
}

void CompletionEngine::run_wait() {
  std::vector<uint32_t> handles;
  std::vector<uint64_t> points;
  std::vector<uint64_t> ids;
  std::vector<Report> ready;  // points that ended before the wait
  std::vector<Call> calls;
  for (;;) {
    handles.clear();
    points.clear();
    ids.clear();
    ready.clear();
    calls.clear();
    int64_t deadline;
    {
      std::lock_guard lk(mu_);
      if (stop_) return;
      deadline = next_deadline(monotonic_ns());
      for (auto &[id, e] : entries_) {
        if (const uint64_t p = e.watch->arm_point()) {
          if (const uint64_t done = ended_early_locked(e, p)) {
            ready.push_back({id, done, true});  // the wait would only return at once for it
            continue;
          }
          handles.push_back(e.handle);
          points.push_back(p);
          ids.push_back(id);
        }
      }
      // Last, so that a signalled watch is reported before a rearm (first_signaled is the lowest
      // index that is signalled).
      handles.push_back(wake_->handle());
      points.push_back(wake_point_ + 1);
      ids.push_back(0);
    }
    uint32_t first = UINT32_MAX;
    int r = -ETIME;  // not waited: a point is ready
    if (ready.empty())
      r = dev_->syncobj_timeline_wait(handles, points, deadline,
                                      DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT, &first);
    if (r && r != -ETIME) {
      // Refused: the points are asked one by one (a signalled timeline point is the kernel's
      // word as much as the wait's), so a kernel that keeps refusing the wait still lets
      // completions through, one pass a millisecond (the sleep below).
      for (size_t i = 0; i < ids.size(); ++i)
        if (ids[i] && kernel_signalled(handles[i], points[i]))  // ids[i] 0: the wake point
          ready.push_back({ids[i], points[i], false});
    }
    const int64_t now = monotonic_ns();
    std::lock_guard calls_held(calls_mu_);
    {
      // Looked up again: a watch removed meanwhile is not called.
      std::lock_guard lk(mu_);
      ++wakeups_;
      if (r == 0 && first < ids.size() && ids[first]) {
        auto it = entries_.find(ids[first]);
        if (it != entries_.end()) calls.push_back({it->second.watch, {ids[first], points[first]}});
      }
      for (const Report &rp : ready) {
        auto it = entries_.find(rp.id);
        if (it != entries_.end()) calls.push_back({it->second.watch, rp});
      }
    }
    call_watches(calls);
    call_due(now);
    if (r && r != -ETIME) usleep(kRefusedPollMs * 1000);  // never spin on a broken device
  }
}

CompletionEngine::Armed CompletionEngine::arm_locked(uint64_t id, Entry &e) {
  const uint64_t p = e.watch->arm_point();
  if (!p) return Armed::kNo;  // nothing to wait for yet
  // One registration outstanding per watch: the kernel cannot take one back, and a second would
  // make a firing ambiguous. An earlier point wanted later is seen when this one fires.
  // A poll-mode VMM's fd in place of ours: the kernel wakes its thread alone, and that thread
  // reports the point (delegated_fired), so a completion costs one registration and one wakeup.
  if (const int direct = e.watch->direct_wake_fd(); direct >= 0) {
    if (dev_->syncobj_eventfd(e.handle, p, direct) == 0) {
      ++registrations_.direct;
      e.direct_armed = p;
      return Armed::kRegistered;
    }
    // Refused: our own eventfd instead, and this thread delivers (through the poll fd).
  }
  // A burst's newest point is often done by the time the thread wakes for an older one: the
  // kernel would signal a registration for it at once, an ioctl and a pass of the loop for nothing.
  if (const uint64_t done = ended_early_locked(e, p)) {
    reported_.push_back({id, done, true});
    return Armed::kReported;
  }
  if (arm_own_locked(e, p)) return Armed::kRegistered;
  // Refused (drm_syncobj_eventfd_ioctl() allocates its entry, so -ENOMEM is a real answer). A
  // kernel that keeps refusing registrations must not leave the point unseen for ever: a
  // signalled timeline point is as much the kernel's word as its eventfd, so it is asked, and
  // asked again on each of the thread's passes, which come every millisecond while a watch is
  // refused (polling_).
  if (kernel_signalled(e.handle, p)) {
    reported_.push_back({id, p, false});
    return Armed::kReported;
  }
  return Armed::kRefused;
}

bool CompletionEngine::kernel_signalled(uint32_t handle, uint64_t p) {
  uint64_t v = 0;
  return dev_->syncobj_query(handle, &v) == 0 && v >= p;
}

uint64_t CompletionEngine::ended_early_locked(Entry &e, uint64_t p) {
  return p > e.kernel_through ? e.watch->signalled_from(p) : 0;
}

void CompletionEngine::call_watches(const std::vector<Call> &calls) {
  for (const Call &c : calls) {
    if (!c.report.early) {
      c.watch->reached(c.report.point);
    } else if (!c.watch->reached_early(c.report.point)) {
      // Rare. Its arm point stays at or below this one until the kernel reports it: the next
      // pass registers (the watch is on to_arm_ again) or waits for it.
      std::lock_guard lk(mu_);
      auto it = entries_.find(c.report.id);
      if (it != entries_.end() && c.report.point > it->second.kernel_through)
        it->second.kernel_through = c.report.point;
    }
  }
}

bool CompletionEngine::arm_own_locked(Entry &e, uint64_t p) {
  if (dev_->syncobj_eventfd(e.handle, p, e.efd.get()) != 0) return false;
  ++registrations_.own;
  e.armed = p;
  return true;
}

bool CompletionEngine::arm_idle_locked() {
  if (orphans_) adopt_orphans_locked();
  // Room for every report the loop may file, made before it registers anything: out of memory
  // half way, the compaction below would leave registered watches on to_arm_, to be registered
  // a second time (and a second edge taken for a later point).
  grow_for(reported_, to_arm_.size());
  size_t keep = 0;
  polling_ = false;
  for (const uint64_t id : to_arm_) {
    auto it = entries_.find(id);
    if (it == entries_.end()) continue;  // removed
    const Armed a = arm_locked(id, it->second);
    if (a == Armed::kNo || a == Armed::kRefused) to_arm_[keep++] = id;  // asked again next time
    polling_ = polling_ || a == Armed::kRefused;
  }
  to_arm_.resize(keep);
  return !reported_.empty();
}

uint64_t CompletionEngine::delegated_point(uint64_t id) const {
  std::lock_guard lk(mu_);
  auto it = entries_.find(id);
  return it != entries_.end() ? it->second.direct_armed : 0;
}

void CompletionEngine::delegated_fired(uint64_t id, uint64_t point, bool handled) {
  {
    std::lock_guard lk(mu_);
    auto it = entries_.find(id);
    if (it == entries_.end() || !it->second.direct_armed) return;
    Entry &e = it->second;
    e.direct_armed = 0;
    try {
      if (handled) {
        // The watch's point is known now: it asks for a later one.
        const Armed a = arm_locked(id, e);
        if (a == Armed::kRegistered) return;
        if (a == Armed::kNo || a == Armed::kRefused) to_arm_.push_back(id);
      } else {
        reported_.push_back({id, point, false});
      }
    } catch (const std::bad_alloc &) {
      orphan_locked(e, handled ? 0 : point);
    }
  }
  rearm();  // the engine thread takes it from here
}

void CompletionEngine::orphan_locked(Entry &e, uint64_t unhandled_point) {
  e.orphaned = true;
  e.orphan_point = std::max(e.orphan_point, unhandled_point);
  orphans_ = true;
}

void CompletionEngine::adopt_orphans_locked() {
  // Rare (the VMM's thread ran out of memory): a walk of the table, where a failure to file one
  // leaves it and the rest marked for the next pass (run() goes on after a bad_alloc).
  for (auto &[id, e] : entries_) {
    if (!e.orphaned) continue;
    if (e.orphan_point)
      reported_.push_back({id, e.orphan_point, false});
    else
      to_arm_.push_back(id);
    e.orphaned = false;
    e.orphan_point = 0;
  }
  orphans_ = false;
}

void CompletionEngine::delegated_lost(uint64_t id) {
  {
    std::lock_guard lk(mu_);
    auto it = entries_.find(id);
    if (it == entries_.end() || !it->second.direct_armed) return;
    Entry &e = it->second;
    const uint64_t p = e.direct_armed;
    e.direct_armed = 0;
    if (arm_own_locked(e, p)) return;
    try {
      to_arm_.push_back(id);
    } catch (const std::bad_alloc &) {
      orphan_locked(e, 0);
    }
  }
  rearm();  // refused too: the engine thread asks again
}

void CompletionEngine::file_locked(uint64_t id, Entry &e, const Report &rp) noexcept {
  try {
    grow_for(fired_, 1);
    grow_for(to_arm_, 1);
  } catch (const std::bad_alloc &) {
    // The edge that brought it is gone, so the point must not be: the entry keeps it, and a
    // later pass files it (adopt_orphans_locked). A point seen only in memory is not the
    // kernel's word: that watch is just armed again.
    orphan_locked(e, rp.early ? 0 : rp.point);
    return;
  }
  fired_.push_back({e.watch, rp});
  to_arm_.push_back(id);
}

void CompletionEngine::take_fired_locked(const epoll_event *events, int n) {
  for (int i = 0; i < n; ++i) {
    // epoll_event is packed on x86-64: copy the id out rather than bind a reference to it.
    const uint64_t id = events[i].data.u64;
    if (id == 0 || id == kTimerEvent) continue;  // the rearm eventfd (read before this), the timer
    auto it = entries_.find(id);
    if (it == entries_.end()) continue;  // removed while the event was on its way
    const uint64_t point = it->second.armed;
    if (!point) continue;  // an edge from a registration already seen
    it->second.armed = 0;
    file_locked(id, it->second, {id, point, false});
  }
  for (const Report &rp : reported_) {
    auto it = entries_.find(rp.id);
    if (it == entries_.end()) continue;  // removed meanwhile (ids are never reused)
    file_locked(rp.id, it->second, rp);
  }
  reported_.clear();
}

void CompletionEngine::run_eventfd() {
  constexpr int kBatch = 32;
  epoll_event events[kBatch];
  for (;;) {
    bool ready;
    {
      std::lock_guard lk(mu_);
      if (stop_) return;
      ready = arm_idle_locked();
    }
    // With the timer set for the earliest deadline, the wait itself needs only the safety net
    // (a timeout at the deadline too would be a second wakeup for it).
    const int64_t before = monotonic_ns();
    const int64_t deadline = set_timer(false) ? before + kSafetyNetNs : next_deadline(before);
    const int64_t wait_ns = deadline - monotonic_ns();
    int timeout_ms = ready || wait_ns <= 0 ? 0 : static_cast<int>((wait_ns + 999'999) / 1'000'000);
    if (polling_) timeout_ms = std::min(timeout_ms, kRefusedPollMs);
    const int n = epoll_wait(epoll_.get(), events, kBatch, timeout_ms);
    const int64_t now = monotonic_ns();
    // The rearm eventfd is read before reported_ is taken: delegated_fired() files a point and
    // then writes it, so a write this read consumes comes with a point the take below sees.
    for (int i = 0; i < n; ++i) {
      if (events[i].data.u64 != 0) continue;
      uint64_t v;
      [[maybe_unused]] ssize_t r = read(wake_efd_.get(), &v, sizeof(v));
    }
    std::lock_guard calls(calls_mu_);
    fired_.clear();
    {
      // One look under the table lock per wakeup, however many points it brought.
      std::lock_guard lk(mu_);
      take_fired_locked(events, n);
      ++wakeups_;
    }
    call_watches(fired_);
    call_due(now);
    if (n < 0 && errno != EINTR) usleep(1000);
  }
}

}  // namespace rvgl
