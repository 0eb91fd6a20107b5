#include "queue/fence_retirer.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <ctime>

namespace rvgl {

namespace {

constexpr int64_t kSafetyNetNs = 250'000'000;

int64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

}  // namespace

std::unique_ptr<FenceRetirer> FenceRetirer::create(std::shared_ptr<AmdgpuDevice> dev, bool async,
                                                   Callback cb, int *err) {
  std::unique_ptr<FenceRetirer> r(new FenceRetirer(dev, async, std::move(cb)));
  r->wake_ = SyncTimeline::create(dev, err);
  if (!r->wake_) return nullptr;
  r->event_fd_.reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!r->event_fd_) {
    *err = -errno;
    return nullptr;
  }
  r->thread_ = std::thread([p = r.get()] { p->run(); });
  *err = 0;
  return r;
}

FenceRetirer::~FenceRetirer() {
  if (!thread_.joinable()) return;  // create() failed before starting it
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  kick();
  thread_.join();
}

void FenceRetirer::kick() {
  if (!wake_) return;
  uint64_t point;
  {
    std::lock_guard lk(mu_);
    point = ++wake_point_;
  }
  wake_->signal(point);
}

void FenceRetirer::add(uint32_t ring_idx, uint64_t fence_id, std::shared_ptr<SyncTimeline> timeline,
                       uint64_t point) {
  if (ring_idx >= RVGL_RING_COUNT) return;
  {
    std::lock_guard lk(mu_);
    // Nothing to wait for on the VMM's own thread: skip the thread hop.
    if (!async_ && !timeline && rings_[ring_idx].empty()) {
      ready_.push_back({ring_idx, fence_id});
      const uint64_t one = 1;
      [[maybe_unused]] ssize_t n = write(event_fd_.get(), &one, sizeof(one));
      return;
    }
    // Behind a pending fence that has a timeline, the thread already waits on that front entry
    // and rebuilds its wait set when it retires: no wakeup (and no signal ioctl) needed.
    const bool waited_on = !rings_[ring_idx].empty() && rings_[ring_idx].front().timeline;
    rings_[ring_idx].push_back({fence_id, std::move(timeline), point});
    if (waited_on) return;
  }
  kick();
}

void FenceRetirer::set_watch_callback(WatchCallback cb) {
  std::lock_guard lk(mu_);
  watch_cb_ = std::move(cb);
}

void FenceRetirer::watch(uint32_t key, std::shared_ptr<SyncTimeline> timeline, uint64_t point) {
  // No wakeup (a signal ioctl per submission): the thread takes the watch into its wait set when it
  // next wakes, which is at once when the guest asks for a fence (nearly every submission does),
  // and within the safety-net interval otherwise. A watch only drives the health check behind
  // events; QUEUE_STATE checks synchronously.
  std::lock_guard lk(mu_);
  watches_.insert_or_assign(key, Watch{std::move(timeline), point});
}

void FenceRetirer::unwatch(uint32_t key) {
  std::lock_guard lk(mu_);
  watches_.erase(key);
}

void FenceRetirer::collect_watches(std::vector<uint32_t> *fired) {
  for (auto it = watches_.begin(); it != watches_.end();) {
    if (it->second.timeline->known_reached() >= it->second.point) {
      fired->push_back(it->first);
      it = watches_.erase(it);
    } else {
      ++it;
    }
  }
}

void FenceRetirer::collect_done(std::vector<Done> *done) {
  for (uint32_t ring = 0; ring < RVGL_RING_COUNT; ++ring) {
    auto &q = rings_[ring];
    while (!q.empty()) {
      const Pending &p = q.front();
      // Not known yet: the wait below returns at once if it is already signalled.
      if (p.timeline && p.timeline->known_reached() < p.point) break;
      done->push_back({ring, p.fence_id});
      q.pop_front();
    }
  }
}

void FenceRetirer::deliver(std::vector<Done> &done) {
  if (done.empty()) return;
  if (async_) {
    for (const auto &d : done)
      cb_(d.ring, d.fence_id);
    std::lock_guard lk(mu_);
    delivered_ += done.size();
    return;
  }
  {
    std::lock_guard lk(mu_);
    ready_.insert(ready_.end(), done.begin(), done.end());
  }
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t n = write(event_fd_.get(), &one, sizeof(one));
}

void FenceRetirer::poll() {
  // Drain the eventfd before taking the batch: a fence that becomes ready in between then leaves
  // the fd readable for the next poll instead of losing its wakeup.
  uint64_t v;
  [[maybe_unused]] ssize_t n = read(event_fd_.get(), &v, sizeof(v));
  std::deque<Done> batch;
  {
    std::lock_guard lk(mu_);
    batch.swap(ready_);
    delivered_ += batch.size();
  }
  for (const auto &d : batch)
    cb_(d.ring, d.fence_id);
}

uint64_t FenceRetirer::delivered() const {
  std::lock_guard lk(mu_);
  return delivered_;
}

size_t FenceRetirer::pending() const {
  std::lock_guard lk(mu_);
  size_t n = ready_.size();
  for (const auto &q : rings_)
    n += q.size();
  return n;
}

void FenceRetirer::run() {
  std::vector<Done> done;
  std::vector<uint32_t> fired;
  std::vector<uint32_t> handles;
  std::vector<uint64_t> points;
  std::vector<std::shared_ptr<SyncTimeline>> hold;  // keeps waited-on syncobjs alive
  for (;;) {
    done.clear();
    fired.clear();
    handles.clear();
    points.clear();
    hold.clear();
    {
      std::lock_guard lk(mu_);
      if (stop_) return;
      collect_done(&done);
      collect_watches(&fired);
      for (const auto &q : rings_) {
        if (q.empty() || !q.front().timeline) continue;
        hold.push_back(q.front().timeline);
        handles.push_back(q.front().timeline->handle());
        points.push_back(q.front().point);
      }
      for (const auto &[key, w] : watches_) {
        hold.push_back(w.timeline);
        handles.push_back(w.timeline->handle());
        points.push_back(w.point);
      }
      // Any add()/kick() after this point signals a later wake point and ends the wait.
      handles.push_back(wake_->handle());
      points.push_back(wake_point_ + 1);
    }
    deliver(done);
    if (!fired.empty()) {
      WatchCallback cb;
      {
        std::lock_guard lk(mu_);
        cb = watch_cb_;
      }
      for (uint32_t key : fired)
        if (cb) cb(key);
    }
    if (!done.empty() || !fired.empty()) continue;  // something moved: rebuild the wait set
    // Sleeps until something completes or a kick arrives. The bounded timeout is only a safety
    // net: a kick whose signal ioctl failed must not leave fences unretired forever.
    uint32_t first = UINT32_MAX;
    int r = dev_->syncobj_timeline_wait(handles, points, now_ns() + kSafetyNetNs,
                                        DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT, &first);
    if (r == 0 && first < hold.size()) hold[first]->note_reached(points[first]);
    if (r && r != -ETIME) usleep(1000);  // never spin on a broken device
  }
}

}  // namespace rvgl
