#include "queue/fence_delivery.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <new>

namespace rvgl {

namespace {

// The deliveries whose callbacks this thread is inside, innermost first: a VMM may poll another
// context from a callback, and that one's callbacks may destroy either. stop() from inside a
// callback does not wait for a delivery it is part of (which would deadlock on deliver_mu_), and
// a poll nested in one of its own callbacks leaves the batch to the outer one. A fence created
// from inside a callback finds the delivery running and is left to its loop, as any other
// thread's is.
struct DeliveringFrame {
  const FenceDelivery *delivery;
  const DeliveringFrame *outer;
};
thread_local const DeliveringFrame *t_delivering = nullptr;

bool delivering_here(const FenceDelivery *d) {
  for (const DeliveringFrame *f = t_delivering; f; f = f->outer)
    if (f->delivery == d) return true;
  return false;
}

class DeliveringScope {
 public:
  explicit DeliveringScope(const FenceDelivery *d) : frame_{d, t_delivering} {
    t_delivering = &frame_;
  }
  ~DeliveringScope() { t_delivering = frame_.outer; }
  DeliveringScope(const DeliveringScope &) = delete;
  DeliveringScope &operator=(const DeliveringScope &) = delete;

 private:
  DeliveringFrame frame_;
};

static_assert(RVGL_RING_COUNT <= 64, "busy_rings_ has a bit per ring");

constexpr size_t kBatchReserve = 64;

}  // namespace

std::unique_ptr<FenceDelivery> FenceDelivery::create(bool async, Callback cb, int *err) {
  std::unique_ptr<FenceDelivery> d(new FenceDelivery(async, std::move(cb)));
  // A delivery has room for its first fences without allocating; more are collected again after
  // these are delivered (collect_some_locked), so a delivery makes progress when memory is short.
  if (async) {
    d->batch_.reserve(kBatchReserve);
  } else {
    d->ready_.reserve(kBatchReserve);
    d->polled_.reserve(kBatchReserve);
  }
  d->event_fd_.reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!d->event_fd_) {
    *err = -errno;
    return nullptr;
  }
  *err = 0;
  return d;
}

FenceDelivery::~FenceDelivery() {
  stop();
}

void FenceDelivery::stop() {
  {
    std::lock_guard lk(mu_);
    stopped_.store(true, std::memory_order_relaxed);
  }
  if (delivering_here(this)) return;  // stopping from inside a callback: nothing else runs
  std::lock_guard wait_out(deliver_mu_);
}

uint64_t FenceDelivery::add(uint32_t ring_idx, uint64_t fence_id,
                            std::shared_ptr<const FenceSource> source, uint64_t point,
                            bool mergeable) {
  if (ring_idx >= RVGL_RING_COUNT) return 0;
  bool ready;
  uint64_t position;
  {
    std::lock_guard lk(mu_);
    if (stopped_) return 0;
    if (!append_locked(ring_idx, {fence_id, std::move(source), point, mergeable})) return 0;
    position = ++added_[ring_idx];
    ++waiting_;
    pending_.fetch_add(1, std::memory_order_relaxed);
    busy_rings_ |= uint64_t{1} << ring_idx;
    // Only the ring's front decides: a fence behind an unreached one cannot retire first. The
    // front may be an earlier fence whose point the caller just made known (create_fence's
    // user-fence path), which this pass delivers together with the new one.
    ready = is_ready(*at_locked(ring_idx, 0));
  }
  // Work already complete (or nothing to wait for) is delivered now, not at the next wakeup.
  if (ready) progress();
  return position;
}

const FenceDelivery::Pending *FenceDelivery::at_locked(uint32_t ring, size_t i) const {
  const auto &q = rings_[ring];
  if (i < q.size()) return &q[i];
  if (i == q.size() && (spilled_rings_ >> ring & 1)) return &spilled_[ring];
  return nullptr;
}

bool FenceDelivery::append_locked(uint32_t ring, Pending p) {
  const uint64_t bit = uint64_t{1} << ring;
  auto &q = rings_[ring];
  try {
    // With memory again, a spilled fence goes back in line first: the ring stays in order. A
    // deque's push_back that throws has no effect, on the argument either.
    if (spilled_rings_ & bit) {
      q.push_back(spilled_[ring]);
      spilled_[ring] = {};
      spilled_rings_ &= ~bit;
    }
    q.push_back(std::move(p));
    return true;
  } catch (const std::bad_alloc &) {
  }
  if (!(spilled_rings_ & bit)) {
    spilled_[ring] = std::move(p);
    spilled_rings_ |= bit;
    return true;
  }
  // Reported in place of the spilled one, which it follows (the VMM retires that one with it), so
  // it waits for what that one waited for too: never reported before the work of a fence it
  // stands for. One condition holds both when either has none (it retires as soon as the
  // fences before it have) or both wait on one timeline; two timelines (a queue destroyed and
  // another made on the ring meanwhile) would need room this fence does not have.
  Pending &s = spilled_[ring];
  if (s.source && p.source && s.source != p.source) return false;
  if (!p.source) {
    p.source = std::move(s.source);
    p.point = s.point;
  } else if (s.source) {
    p.point = std::max(p.point, s.point);
  }
  p.covers += s.covers;
  s = std::move(p);
  return true;
}

void FenceDelivery::pop_front_locked(uint32_t ring) {
  auto &q = rings_[ring];
  if (!q.empty()) {
    q.pop_front();
    return;
  }
  spilled_[ring] = {};
  spilled_rings_ &= ~(uint64_t{1} << ring);
}

template <class Out>
void FenceDelivery::collect_locked(Out *done) {
  uint64_t busy = busy_rings_;
  while (busy) {
    const uint32_t ring = static_cast<uint32_t>(__builtin_ctzll(busy));
    busy &= busy - 1;
    // Each fence is asked once: the answer for the next one carries over to its turn.
    const Pending *front = at_locked(ring, 0);
    bool ready = front && is_ready(*front);
    while (ready) {
      const Pending &p = *at_locked(ring, 0);
      const Pending *next = at_locked(ring, 1);
      const bool next_ready = next && is_ready(*next);
      // A mergeable fence that retires together with the next one of its ring is reported by
      // that one: the VMM retires every earlier fence of a ring with a later one (QEMU's
      // virgl_write_context_fence, crosvm's fence handler, vtest_signal_sync_queue), so a burst
      // costs one callback. Non-mergeable fences are each reported.
      if (!(p.mergeable && next_ready)) done->push_back({ring, p.fence_id});
      pending_.fetch_sub(p.covers, std::memory_order_relaxed);
      retired_ += p.covers;
      taken_[ring] += p.covers;
      waiting_ -= p.covers;
      pop_front_locked(ring);
      ready = next_ready;
    }
    if (!at_locked(ring, 0)) busy_rings_ &= ~(uint64_t{1} << ring);
  }
}

bool FenceDelivery::collect_some_locked(std::vector<Done> *done) {
  try {
    collect_locked(done);
    return false;
  } catch (const std::bad_alloc &) {
    // Out of memory growing the batch part-way: what was taken is delivered, and the rest (still
    // on its rings: collect_locked() takes a fence off only once it is stored) is collected
    // again after it, or by the next progress() or poll(). Thrown on, it would leave the batch's
    // fences taken and never delivered, or the delivery claimed for ever.
    return true;
  }
}

void FenceDelivery::signal_poll_fd() {
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t n = write(event_fd_.get(), &one, sizeof(one));
}

void FenceDelivery::progress() {
  if (!async_) {
    bool wake;
    {
      std::lock_guard lk(mu_);
      if (stopped_) return;
      const size_t before = ready_.size();
      // Out of memory, what is not collected stays on its ring, and the VMM's poll() is asked
      // for all the same: it collects them on its own thread.
      const bool left = collect_some_locked(&ready_);
      wake = ready_.size() != before || left;
    }
    if (wake) signal_poll_fd();
    return;
  }
  std::vector<Done> &done = batch_;  // the deliverer's alone, and it keeps its capacity
  {
    // One thread delivers at a time; another that finds it busy leaves its fences to it rather
    // than waiting, and says so (more_): the deliverer collects again only then, and stops when
    // no one did during its callbacks, so what was made known before that check goes with it and
    // what comes after finds no deliverer and delivers itself. Neither the VMM's thread
    // (create_fence) nor the engine's ever sleeps on the other's callbacks. The first collect is
    // in the same look as the claim: a delivery costs two looks under mu_, not four.
    std::lock_guard lk(mu_);
    if (stopped_) return;
    if (delivering_) {
      more_ = true;
      return;
    }
    done.clear();
    if (collect_some_locked(&done)) more_ = true;
    if (done.empty()) return;
    delivering_ = true;
  }
  // Uncontended but for stop(), which waits a batch out. A stop() that set stopped_ after the
  // collect above and took deliver_mu_ first has returned: nothing may be called back then. Its
  // store came before its unlock of deliver_mu_, so this read (without mu_) sees it.
  std::lock_guard serial(deliver_mu_);
  if (stopped_.load(std::memory_order_relaxed)) {
    std::lock_guard lk(mu_);
    delivering_ = false;
    return;
  }
  DeliveringScope here(this);
  for (;;) {
    for (const auto &d : done) {
      if (stopped_.load(std::memory_order_relaxed)) break;  // by a callback of this batch
      cb_(d.ring, d.fence_id);
    }
    std::lock_guard lk(mu_);
    done.clear();
    const bool again = more_ && !stopped_;
    more_ = false;
    if (again && collect_some_locked(&done)) more_ = true;
    if (done.empty()) {
      delivering_ = false;
      break;
    }
  }
}

bool FenceDelivery::in_callback_here() const {
  return delivering_here(this);
}

bool FenceDelivery::drain_poll_fd() {
  uint64_t v = 0;
  return read(event_fd_.get(), &v, sizeof(v)) == static_cast<ssize_t>(sizeof(v));
}

void FenceDelivery::poll() {
  // With async callbacks a VMM's poll (QEMU still runs its timer) is one more deliverer, and
  // takes part in the one-deliverer protocol like any: a ring's fences stay in order, and the
  // VMM's thread never sleeps on the engine's callbacks.
  if (async_) {
    progress();
    return;
  }
  // From inside one of this delivery's own callbacks: the outer poll holds deliver_mu_ and
  // delivers what is left; what becomes ready later signals the poll fd again.
  if (in_callback_here()) return;
  std::lock_guard serial(deliver_mu_);
  bool left_on_rings;
  {
    std::lock_guard lk(mu_);
    if (stopped_) return;
    // What the engine queued comes first, then what the VMM's thread made known itself (a ring's
    // fences stay in order either way: ready_ holds only fences that were ahead of those still
    // pending). Out of memory, the fences not collected stay on their rings (collect_locked()
    // takes a fence off its ring only once it is stored) for the next poll, which the poll fd
    // asks for.
    left_on_rings = collect_some_locked(&ready_);
    polled_.swap(ready_);
  }
  DeliveringScope here(this);
  for (const auto &d : polled_) {
    if (stopped_.load(std::memory_order_relaxed)) break;  // the VMM destroyed us in a callback
    cb_(d.ring, d.fence_id);
  }
  polled_.clear();
  if (left_on_rings) signal_poll_fd();
}

uint64_t FenceDelivery::first_pending_point(const FenceSource *source) const {
  // Mergeable or not, each fence waits for its own point: merging decides how fences that are
  // done together are reported, never that one waits for later work (virglrenderer's drm
  // contexts retire a fence with its own submission). A fence added on the VMM's thread before a
  // submission whose point the caller has read (an acquire load of the queue's last sequence
  // number) is counted here, so the answer is as fresh as the lock's.
  if (pending_.load(std::memory_order_relaxed) == 0) return 0;
  std::lock_guard lk(mu_);
  uint64_t best = 0;
  uint64_t busy = busy_rings_;
  while (busy) {
    const uint32_t ring = static_cast<uint32_t>(__builtin_ctzll(busy));
    busy &= busy - 1;
    for (size_t i = 0; const Pending *p = at_locked(ring, i); ++i) {
      if (p->source.get() != source) continue;
      if (!best || p->point < best) best = p->point;
      break;  // later fences of a ring wait for later points
    }
  }
  return best;
}

uint64_t FenceDelivery::waiting() const {
  std::lock_guard lk(mu_);
  return waiting_;
}

uint64_t FenceDelivery::held() const {
  std::lock_guard lk(mu_);
  return waiting_ + ready_.size();
}

bool FenceDelivery::taken_through(uint32_t ring, uint64_t n) const {
  if (ring >= RVGL_RING_COUNT) return true;
  std::lock_guard lk(mu_);
  return taken_[ring] >= n;
}

uint64_t FenceDelivery::retired() const {
  std::lock_guard lk(mu_);
  return retired_;
}

size_t FenceDelivery::pending() const {
  std::lock_guard lk(mu_);
  size_t n = ready_.size();
  for (const auto &q : rings_)
    n += q.size();
  return n + static_cast<size_t>(__builtin_popcountll(spilled_rings_));
}

}  // namespace rvgl
