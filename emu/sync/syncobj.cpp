#include "sync/syncobj.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>

#include "core/counters.h"

namespace rvgl::emu {

Syncobj::Syncobj() {
  counters().syncobjs_alive.fetch_add(1, std::memory_order_relaxed);
}
Syncobj::~Syncobj() {
  counters().syncobjs_alive.fetch_sub(1, std::memory_order_relaxed);
}

void Syncobj::replace_locked(std::shared_ptr<Fence> fence) {
  points_.clear();
  signaled_floor_ = 0;
  if (fence) points_.push_back({0, std::move(fence)});
  run_eventfds_locked();
  waiters_.wake_all_locked();
}

void Syncobj::add_point_locked(uint64_t point, std::shared_ptr<Fence> fence) {
  // The new node chains onto whatever fence the syncobj held (drm_syncobj_add_point); signaled
  // nodes before it are collected, as dma_fence_chain garbage-collects them.
  prune_locked();
  points_.push_back({point, std::move(fence)});
  run_eventfds_locked();
  waiters_.wake_all_locked();
}

namespace {

// eventfd_signal(): the counter goes up by one.
void signal_eventfd(EventfdRef &fd) {
  counters().syncobj_eventfds_signalled.fetch_add(1, std::memory_order_relaxed);
  fd.signal();
}

// syncobj_eventfd_entry_func()'s callback: the eventfd goes up once every fence the point stands
// for has signalled. `left` is shared only when the point stands for several fences.
class EventfdWake final : public FenceCallback {
 public:
  EventfdWake(std::shared_ptr<EventfdRef> fd, std::shared_ptr<std::atomic<size_t>> left)
      : fd_(std::move(fd)), left_(std::move(left)) {}
  void signaled() override {
    if (!left_ || left_->fetch_sub(1) == 1) signal_eventfd(*fd_);
  }

 private:
  std::shared_ptr<EventfdRef> fd_;
  std::shared_ptr<std::atomic<size_t>> left_;
};

}  // namespace

bool Syncobj::try_fire_locked(const EventfdEntry &e) const {
  if (!available_locked(e.point)) return false;
  std::vector<std::shared_ptr<Fence>> fences;
  if (!e.available_only) fences = fences_for_locked(e.point);
  std::erase_if(fences, [](const auto &f) { return f->is_signaled_locked(); });
  if (fences.empty()) {
    signal_eventfd(*e.fd);
    return true;
  }
  // The entry now follows the fences the point stands for; a later replace does not move it
  // (the kernel adds a callback to the fence it found).
  std::shared_ptr<std::atomic<size_t>> left;
  if (fences.size() > 1) left = std::make_shared<std::atomic<size_t>>(fences.size());
  for (const auto &f : fences)
    f->on_signal_locked(std::make_unique<EventfdWake>(e.fd, left));
  return true;
}

void Syncobj::run_eventfds_locked() {
  std::erase_if(eventfds_, [this](const EventfdEntry &e) { return try_fire_locked(e); });
}

void Syncobj::add_eventfd_locked(std::shared_ptr<EventfdRef> fd, uint64_t point,
                                 bool available_only) {
  EventfdEntry e{std::move(fd), point, available_only};
  if (!try_fire_locked(e)) eventfds_.push_back(std::move(e));
}

void Syncobj::subscribe_locked(Waiter &w, const std::shared_ptr<Syncobj> &s, uint64_t point) {
  w.subscribe_locked(s->waiters_, s);
  if (!s->available_locked(point)) return;
  for (const auto &f : s->fences_for_locked(point))
    Fence::subscribe_locked(w, f);
}

bool Syncobj::available_locked(uint64_t point) const {
  if (point == 0) return !points_.empty() || signaled_floor_ > 0;
  if (point <= signaled_floor_) return true;
  for (auto it = points_.rbegin(); it != points_.rend(); ++it)
    if (it->value >= point) return true;
  return false;
}

std::vector<std::shared_ptr<Fence>> Syncobj::fences_for_locked(uint64_t point) const {
  std::vector<std::shared_ptr<Fence>> out;
  if (point == 0) {
    for (const auto &p : points_)
      out.push_back(p.fence);
    return out;
  }
  if (point <= signaled_floor_) return out;
  // dma_fence_chain_find_seqno: the first node at or above `point`; a chain node signals once
  // it and every node before it have.
  for (const auto &p : points_) {
    out.push_back(p.fence);
    if (p.value >= point) return out;
  }
  out.clear();
  return out;
}

bool Syncobj::signaled_locked(uint64_t point) const {
  if (!available_locked(point)) return false;
  for (const auto &f : fences_for_locked(point))
    if (!f->is_signaled_locked()) return false;
  return true;
}

void Syncobj::prune_locked() {
  size_t n = 0;
  while (n < points_.size() && points_[n].fence->is_signaled_locked()) {
    signaled_floor_ = std::max(signaled_floor_, points_[n].value);
    ++n;
  }
  // Keep the newest node so "last submitted" and exports still see the chain head.
  if (n == points_.size() && n > 0) --n;
  points_.erase(points_.begin(), points_.begin() + static_cast<long>(n));
}

uint64_t Syncobj::query_locked(bool last_submitted) {
  prune_locked();
  if (last_submitted) {
    uint64_t v = signaled_floor_;
    for (const auto &p : points_)
      v = std::max(v, p.value);
    return v;
  }
  uint64_t v = signaled_floor_;
  for (const auto &p : points_) {
    if (p.value == 0) continue;
    if (!p.fence->is_signaled_locked()) break;
    v = std::max(v, p.value);
  }
  return v;
}

}  // namespace rvgl::emu
