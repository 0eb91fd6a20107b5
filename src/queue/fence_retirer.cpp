#include "queue/fence_retirer.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <climits>

namespace rvgl {

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
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  kick();
  if (thread_.joinable()) thread_.join();
}

void FenceRetirer::kick() {
  uint64_t point;
  {
    std::lock_guard lk(mu_);
    point = ++wake_point_;
  }
  wake_->signal(point);
}

void FenceRetirer::add(uint32_t ring_idx, uint64_t fence_id,
                       std::shared_ptr<SyncTimeline> timeline, uint64_t point) {
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
    rings_[ring_idx].push_back({fence_id, std::move(timeline), point});
  }
  kick();
}

void FenceRetirer::collect_done(std::vector<Done> *done) {
  for (uint32_t ring = 0; ring < RVGL_RING_COUNT; ++ring) {
    auto &q = rings_[ring];
    uint64_t reached = 0;
    const SyncTimeline *queried = nullptr;
    while (!q.empty()) {
      const Pending &p = q.front();
      if (p.timeline) {
        if (p.timeline.get() != queried) {
          reached = p.timeline->value();
          queried = p.timeline.get();
        }
        if (reached < p.point) break;
      }
      done->push_back({ring, p.fence_id});
      q.pop_front();
    }
  }
}

void FenceRetirer::deliver(std::vector<Done> &done) {
  if (done.empty()) return;
  if (async_) {
    for (const auto &d : done) cb_(d.ring, d.fence_id);
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
  std::deque<Done> batch;
  {
    std::lock_guard lk(mu_);
    batch.swap(ready_);
    delivered_ += batch.size();
  }
  uint64_t v;
  [[maybe_unused]] ssize_t n = read(event_fd_.get(), &v, sizeof(v));
  for (const auto &d : batch) cb_(d.ring, d.fence_id);
}

uint64_t FenceRetirer::delivered() const {
  std::lock_guard lk(mu_);
  return delivered_;
}

size_t FenceRetirer::pending() const {
  std::lock_guard lk(mu_);
  size_t n = ready_.size();
  for (const auto &q : rings_) n += q.size();
  return n;
}

void FenceRetirer::run() {
  std::vector<Done> done;
  std::vector<uint32_t> handles;
  std::vector<uint64_t> points;
  std::vector<std::shared_ptr<SyncTimeline>> hold;  // keeps waited-on syncobjs alive
  for (;;) {
    done.clear();
    handles.clear();
    points.clear();
    hold.clear();
    {
      std::lock_guard lk(mu_);
      if (stop_) return;
      collect_done(&done);
      for (const auto &q : rings_) {
        if (q.empty() || !q.front().timeline) continue;
        hold.push_back(q.front().timeline);
        handles.push_back(q.front().timeline->handle());
        points.push_back(q.front().point);
      }
      // Any add()/kick() after this point signals a later wake point and ends the wait.
      handles.push_back(wake_->handle());
      points.push_back(wake_point_ + 1);
    }
    deliver(done);
    if (!done.empty()) continue;  // heads moved: rebuild the wait set
    int r = dev_->syncobj_timeline_wait(handles, points, INT64_MAX,
                                        DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT, nullptr);
    if (r && r != -ETIME) usleep(1000);  // never spin on a broken device
  }
}

}  // namespace rvgl
