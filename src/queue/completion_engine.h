// The process's one completion thread (DESIGN.md D9, docs/threads.md). It sleeps in a single
// syncobj wait over every watched GPU timeline of every context, whatever the number of contexts:
// each context's timelines live in that context's own DRM file, so the engine imports them (the
// syncobj itself, not a point) into a DRM file of its own, where one wait covers them all.
//
// A watch says which point it wants next (arm_point). Two ways to wait, chosen when the engine
// starts:
// - eventfd (Linux 6.6, DRM_IOCTL_SYNCOBJ_EVENTFD): each watch has an eventfd in one epoll set,
//   registered for its point once and again only after it fired, so a wakeup costs the same
//   whatever the number of watches;
// - one syncobj wait (older kernels): a single WAIT_FOR_SUBMIT timeline wait over every watch,
//   rebuilt after each wakeup (its cost grows with the number of watches).
// Either way a watch may be armed on a point nobody has submitted yet, so a submission needs no
// wakeup of this thread: no ioctl on the VMM's thread per fence or per submit. Watches may also
// ask for a deadline (rate-limited work such as health checks).
//
// Deadlines are kept in order by the engine, not asked of every watch on every wakeup: a watch
// reports a change with deadline_moved() (a wakeup then costs the same whatever the number of
// contexts, each of which has a timer).
//
// Threads: add/remove/rearm/deadline_moved on any thread; arm_point is called on the engine
// thread with the engine's table lock held (so it must not call the engine); deadline_ns under
// the timer lock (a leaf: it must take no lock); reached/tick on the engine thread without
// either. Once remove() returns, the engine never calls that watch again.
#pragma once

#include <sys/epoll.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "amdgpu/amdgpu_device.h"
#include "queue/sync_timeline.h"

namespace rvgl {

class CompletionEngine {
 public:
  class Watch {
   public:
    // The next point to wait for, 0 for none now.
    virtual uint64_t arm_point() = 0;
    // The point handed out by arm_point() has signalled.
    virtual void reached(uint64_t point) = 0;
    // CLOCK_MONOTONIC ns at which tick() is wanted, 0 for none. Read when the watch is added,
    // after each tick(), and when deadline_moved() says it changed.
    virtual int64_t deadline_ns() { return 0; }
    virtual void tick(int64_t /*now_ns*/) {}
    // eventfd mode: an eventfd of someone else's (a poll-mode VMM's) that the kernel signals
    // instead of this thread's when the armed point is reached, so that thread wakes with no hop
    // through this one and reports the point (delegated_fired); -1 for none. Called with the
    // table lock held.
    virtual int direct_wake_fd() { return -1; }
    // A point at or after `point` that the watch can tell has ended without a system call (a
    // memory the GPU writes when a job ends), 0 when it cannot. Asked before the thread waits for
    // an arm point: one already ended goes to reached_early() at once, with no registration or
    // wait ioctl that the kernel would only answer at once. Called with the table lock held.
    virtual uint64_t signalled_from(uint64_t /*point*/) { return 0; }
    // A point signalled_from() found. The kernel need not have processed that job's end yet (its
    // interrupt, and a fault recorded before it), so the watch takes the point only where that
    // does not matter; false leaves it to the kernel: the thread waits for it as for any point.
    // After true, as after reached(), the arm point is past `point`.
    virtual bool reached_early(uint64_t point) {
      reached(point);
      return true;
    }

   protected:
    ~Watch() = default;
  };

  // The process's engine, created (thread started) on first use and gone with its last user.
  // `dev` names the device whose node the engine opens for its own file when it starts.
  static std::shared_ptr<CompletionEngine> acquire(const AmdgpuDevice &dev, int *err);
  ~CompletionEngine();
  CompletionEngine(const CompletionEngine &) = delete;
  CompletionEngine &operator=(const CompletionEngine &) = delete;

  // Watches `timeline` (a syncobj of any DRM file) for `w`. Costs two ioctls (export, import);
  // done once per queue, not per submission.
  int add(const SyncTimeline &timeline, Watch *w, uint64_t *id);
  // A watch with no timeline: deadlines only.
  int add_timer(Watch *w, uint64_t *id);
  void remove(uint64_t id);
  // Timer `id`'s deadline_ns() changed: read again now. Takes only the timer lock, so the watch
  // may call it with its own locks held. It does not wake the thread: a deadline moved earlier
  // than any the thread sleeps for needs rearm() too (outside the watch's locks).
  void deadline_moved(uint64_t id);
  // Makes the thread ask every watch again now (one signal ioctl). Needed only when a watch's
  // arm point or deadline moved earlier than what the thread waits for.
  void rearm();
  // A timer's deadline moved earlier (after deadline_moved(), outside the watch's locks): in
  // eventfd mode sets the engine's timerfd for it (one system call, no wakeup); wakes the thread
  // only without a timerfd (wait mode) or when the kernel refused to set it.
  void deadline_earlier();

  // eventfd mode, a watch whose direct_wake_fd() the kernel signals in place of this thread's:
  // the point registered for it, 0 when none is (the engine's own eventfd is used then).
  uint64_t delegated_point(uint64_t id) const;
  // The direct fd's owner found `point` (at or past delegated_point(id)) reached. `handled`: it
  // told the health owner and made the point known itself; the watch is registered again here
  // (one ioctl on the caller's thread). Otherwise the engine thread calls reached(point) first.
  void delegated_fired(uint64_t id, uint64_t point, bool handled);
  // The direct fd's owner could not tell whether the delegated point was reached (its query
  // failed): the engine's own eventfd is registered for that point instead (the kernel signals a
  // registration for a point already reached at once), so the engine sees it.
  void delegated_lost(uint64_t id);

  size_t watch_count() const;
  uint64_t wakeups() const;  // for tests and benchmarks: waits that returned
  // For tests: rearm() calls so far (each one wakes the thread).
  uint64_t rearms() const { return rearms_.load(std::memory_order_relaxed); }
  // For tests: SYNCOBJ_EVENTFD registrations made so far, of the engine's own eventfds and of
  // watches' direct fds.
  struct Registrations {
    uint64_t own = 0;
    uint64_t direct = 0;
  };
  Registrations registrations() const;
  bool uses_eventfd() const { return use_eventfd_; }

  // Threads the engine runs now in this process (0 or 1).
  static int threads_running();

 private:
  struct Entry {
    uint32_t handle = 0;  // in the engine's file; 0 for a timer
    Watch *watch = nullptr;
    UniqueFd efd;        // eventfd mode: signalled by the kernel when `armed` is
    uint64_t armed = 0;  // eventfd mode: the point registered and not yet seen (0: none)
    // The point the watch's direct_wake_fd() is registered for, in place of `armed`: the fd's
    // owner reports it (0: none outstanding).
    uint64_t direct_armed = 0;
    // Arm points up to this one are waited for through the kernel: the watch refused to take
    // one early (reached_early).
    uint64_t kernel_through = 0;
    // A delegated point the VMM's thread had no memory to hand over (adopt_orphans_locked): to
    // be armed again, or with `orphan_point` set, that point reported unhandled.
    bool orphaned = false;
    uint64_t orphan_point = 0;
  };
  // A point for a watch's callbacks: from the kernel (a firing, a delegated report), or found
  // early in memory (signalled_from).
  struct Report {
    uint64_t id = 0;
    uint64_t point = 0;
    bool early = false;
  };
  struct Call {
    Watch *watch = nullptr;
    Report report;
  };
  explicit CompletionEngine(std::shared_ptr<AmdgpuDevice> dev) : dev_(std::move(dev)) {}
  int start();
  bool probe_eventfd();
  void run();
  void run_wait();
  void run_eventfd();
  // eventfd mode: registers each watch on to_arm_ (mu_ held). True when a point is on reported_
  // (ended already, or delegated back): the thread must not sleep before it takes them.
  bool arm_idle_locked();
  // Out of memory where a point or a watch to arm must not be dropped (the VMM's thread in
  // delegated_fired() or delegated_lost(), the engine's in file_locked()): the entry is marked,
  // allocating nothing, and arm_idle_locked() files it on a later pass (mu_ held).
  void orphan_locked(Entry &e, uint64_t unhandled_point);
  void adopt_orphans_locked();
  // The point of `e` that ended already, for arm point `p`, if the watch may be asked (mu_ held).
  static uint64_t ended_early_locked(Entry &e, uint64_t p);
  // Calls the watches for `calls` (calls_mu_ held); the early points a watch refused are waited
  // for through the kernel from then on.
  void call_watches(const std::vector<Call> &calls);
  enum class Armed {
    kNo,          // no point now: asked again next time
    kRefused,     // the kernel refused to register and the point has not signalled: asked again
                  // within kRefusedPollMs
    kRegistered,  // an eventfd is registered for the point
    kReported,    // the point had signalled already: filed on reported_, nothing registered
  };
  // Arms watch `id` for its arm point (mu_ held).
  Armed arm_locked(uint64_t id, Entry &e);
  // Registers the engine's own eventfd of `e` for point `p` (mu_ held); false when refused.
  bool arm_own_locked(Entry &e, uint64_t p);
  // Asks the kernel whether `handle`'s timeline has signalled `p` (one SYNCOBJ_QUERY): the way
  // a point is seen while the kernel refuses to register or wait for it. Needs no lock.
  bool kernel_signalled(uint32_t handle, uint64_t p);
  // eventfd mode: moves the points of the fired watches among `events` and the delegated points
  // reported to this thread into fired_ (mu_ held; the watches are called after, under calls_mu_).
  // Never throws: a point the kernel reported was taken from it (an edge-triggered eventfd), so
  // running out of memory here must not lose it.
  void take_fired_locked(const epoll_event *events, int n);
  // Files one point into fired_ and its watch on to_arm_; out of memory, orphans the entry with
  // the point instead (mu_ held).
  void file_locked(uint64_t id, Entry &e, const Report &rp) noexcept;
  // Room for n more elements of v, grown geometrically (reserve() alone would allocate exactly
  // what is asked, each time); throws std::bad_alloc, leaving v as it was.
  template <class V>
  static void grow_for(V &v, size_t n) {
    if (v.capacity() - v.size() >= n) return;
    v.reserve(std::max(v.size() + n, 2 * v.capacity()));
  }
  // The filing key of a timer with no deadline: after every real one, so each timer has one
  // node in by_deadline_ from add to remove and a refile allocates nothing.
  static constexpr int64_t kNoDeadline = INT64_MAX;
  struct Timer {
    Watch *watch = nullptr;
    int64_t at = kNoDeadline;  // the deadline it reported last
  };
  // Reads the watch's deadline again and files it (timers_mu_ held).
  void refile_locked(uint64_t id, Timer &t);
  int64_t next_deadline(int64_t now);
  // eventfd mode: sets the timerfd for earliest_ (only when that is earlier than it is set for, if
  // `only_earlier`); takes timers_mu_. True when the timer stands for earliest_ (or for an
  // earlier one) afterwards, false without a timer or when refused.
  bool set_timer(bool only_earlier);
  static constexpr uint64_t kTimerEvent = UINT64_MAX;  // the timerfd's epoll data (no watch id)
  void call_due(int64_t now);
  int insert(uint32_t handle, Watch *w, uint64_t *id);

  std::shared_ptr<AmdgpuDevice> dev_;  // the engine's own DRM file
  bool use_eventfd_ = false;
  std::shared_ptr<SyncTimeline> wake_;  // wait mode: a rearm signals its next point
  UniqueFd epoll_;                      // eventfd mode
  UniqueFd wake_efd_;                   // eventfd mode: a rearm writes it
  UniqueFd timer_fd_;                   // eventfd mode: expires at earliest_ (none: rearm())

  // entries_, to_arm_, reported_, wake_point_, stop_, wakeups_, registrations_, next_id_
  mutable std::mutex mu_;
  std::map<uint64_t, Entry> entries_;  // timeline watches

  // Timer watches and their deadlines in order. A leaf lock: nothing else is taken under it.
  mutable std::mutex timers_mu_;
  std::map<uint64_t, Timer> timers_;
  std::set<std::pair<int64_t, uint64_t>> by_deadline_;  // (at, id) of every timer
  // The first key of by_deadline_, written under timers_mu_: the thread reads it before each
  // sleep without the lock.
  std::atomic<int64_t> earliest_{kNoDeadline};
  // timers_mu_: the deadline timer_fd_ stands for, and when it expires (that deadline rounded up
  // to a whole millisecond; 0: disarmed).
  int64_t timer_at_ = kNoDeadline;
  int64_t timer_expiry_ = 0;
  void note_earliest_locked() {
    earliest_.store(by_deadline_.empty() ? kNoDeadline : by_deadline_.begin()->first,
                    std::memory_order_release);
  }
  // eventfd mode: watches with no registration outstanding (new, or their point fired), so a
  // wakeup re-arms what fired rather than walking every watch.
  std::vector<uint64_t> to_arm_;
  // eventfd mode: points (watch id, point) reported for this thread to handle: delegated ones,
  // and arm points found reached before a registration.
  std::vector<Report> reported_;
  // eventfd mode, the engine thread's alone: the calls of one wakeup, kept so a wakeup allocates
  // nothing.
  std::vector<Call> fired_;
  // eventfd mode: a watch left on to_arm_ was refused by the kernel (arm_idle_locked): the next
  // pass comes within kRefusedPollMs rather than the safety net.
  bool polling_ = false;
  bool orphans_ = false;  // an entry is orphaned
  uint64_t next_id_ = 1;
  uint64_t wake_point_ = 0;
  uint64_t wakeups_ = 0;
  Registrations registrations_;
  std::atomic<uint64_t> rearms_{0};
  bool stop_ = false;

  // Held by the engine thread while it calls reached()/tick(); remove() takes it to wait out a
  // call in progress.
  std::mutex calls_mu_;
  std::thread thread_;
  std::thread::id thread_id_;
};

}  // namespace rvgl
