#include "global_fences.h"

#include <chrono>
#include <new>
#include <system_error>
#include <thread>
#include <utility>

#include "log.h"
#include "util/monotonic_clock.h"

namespace rvgl::hooks {

namespace {

// How long the waiter sleeps in one kernel wait before looking for a stop request or newer
// work. Not a poll: fences are delivered the moment their wait returns.
constexpr int64_t kWaitSliceNs = 50'000'000;

// Drops the snapshots that are reached; true when none is left.
bool prune(std::vector<WorkSnapshot> &work) {
  std::erase_if(work, [](WorkSnapshot &w) { return w.reached(); });
  return work.empty();
}

}  // namespace

void GlobalFences::start(void *cookie, WriteFenceFn vmm_write, bool async) {
  stop();
  {
    // Lock order: deliver_mu_ before mu_ (deliver() takes mu_ inside), never the reverse.
    std::lock_guard dl(deliver_mu_);
    delivered_.reset();
  }
  std::lock_guard lk(mu_);
  cookie_ = cookie;
  vmm_write_ = vmm_write;
  async_ = async;
  stopping_ = false;
  waiter_failed_ = false;
}

void GlobalFences::stop() {
  std::thread t;
  {
    std::lock_guard lk(mu_);
    stopping_ = true;
    entries_.clear();
    real_max_.reset();
    released_.reset();
    deferred_.reset();
    last_added_.reset();
    t = std::move(waiter_);
  }
  cv_.notify_all();
  if (t.joinable()) t.join();
}

void GlobalFences::add(uint32_t id, std::vector<WorkSnapshot> work) {
  std::erase_if(work, [](const WorkSnapshot &w) { return w.empty(); });
  std::lock_guard lk(mu_);
  const std::optional<uint32_t> before = std::exchange(last_added_, id);
  if (entries_.empty() && work.empty()) return;  // nothing of ours: pass-through
  entries_.push_back({id, false, std::move(work), before});
  if (async_) ensure_waiter_locked();
  cv_.notify_all();
}

void GlobalFences::real_refused(uint32_t id, bool ours) {
  std::unique_lock lk(mu_);
  Entry *e = nullptr;
  for (auto it = entries_.rbegin(); it != entries_.rend(); ++it)
    if (it->id == id) {
      e = &*it;
      break;
    }
  if (!e && !ours) return;  // the real library's answer stands, as without us
  if (e) e->real_done = true;
  if (!real_max_ || *real_max_ < id) real_max_ = id;
  std::optional<uint32_t> target = e ? collect_locked() : std::optional<uint32_t>(id);
  if (!async_) {
    // Still inside the VMM's create_fence, and QEMU queues the command only once that returns
    // (virtio_gpu_process_cmdq): a write now would find nothing to retire and never come again.
    // QEMU polls right after processing its queue (virtio_gpu_virgl_fence_poll), so it goes then.
    if (target && (!deferred_ || *deferred_ < *target)) deferred_ = target;
    return;
  }
  lk.unlock();
  cv_.notify_all();
  deliver(target);
}

void GlobalFences::real_signalled(void *cookie, uint32_t id) {
  std::unique_lock lk(mu_);
  if (entries_.empty()) {
    // Nothing held: exactly what the real library said, on its thread, now.
    const WriteFenceFn write = vmm_write_;
    lk.unlock();
    std::lock_guard dl(deliver_mu_);
    if (write) write(cookie, id);
    if (!delivered_ || *delivered_ < id) delivered_ = id;
    return;
  }
  for (auto &e : entries_)
    if (e.id <= id) e.real_done = true;
  if (!real_max_ || *real_max_ < id) real_max_ = id;
  const auto target = collect_locked();
  lk.unlock();
  cv_.notify_all();
  deliver(target);
}

void GlobalFences::check() {
  std::unique_lock lk(mu_);
  auto target = std::exchange(deferred_, std::nullopt);
  if (!entries_.empty())
    if (const auto held = collect_locked(); held && (!target || *target < *held)) target = held;
  lk.unlock();
  deliver(target);
}

size_t GlobalFences::held() const {
  std::lock_guard lk(mu_);
  return entries_.size();
}

std::optional<uint32_t> GlobalFences::collect_locked() {
  while (!entries_.empty() && entries_.front().real_done && prune(entries_.front().work))
    entries_.pop_front();
  if (!real_max_) return std::nullopt;
  // Everything below the oldest held fence may go, but no further than the real library got:
  // that includes fences the real library signalled that were never held (passed through before
  // anything of ours was outstanding), which must not wait for a later held one.
  std::optional<uint32_t> allowed = real_max_;
  if (!entries_.empty()) {
    // The newest fence the VMM has below the oldest held one (none: nothing to write).
    const std::optional<uint32_t> below = entries_.front().before;
    if (!below) return std::nullopt;
    allowed = std::min(*real_max_, *below);
  }
  if (released_ && *released_ >= *allowed) return std::nullopt;  // nothing new
  released_ = allowed;
  return allowed;
}

void GlobalFences::deliver(std::optional<uint32_t> id) {
  if (!id) return;
  std::lock_guard dl(deliver_mu_);
  if (delivered_ && *delivered_ >= *id) return;  // the VMM has retired these already
  WriteFenceFn write;
  void *cookie;
  {
    std::lock_guard lk(mu_);
    write = vmm_write_;
    cookie = cookie_;
  }
  delivered_ = id;
  if (write) write(cookie, *id);
}

void GlobalFences::ensure_waiter_locked() {
  if (waiter_.joinable() || waiter_failed_ || stopping_) return;
  try {
    waiter_ = std::thread([this] { waiter_main(); });
  } catch (const std::exception &e) {
    // Thread exhaustion (std::system_error), or no memory for the thread's state (bad_alloc):
    // fences still retire from the VMM's own calls (its poll timer).
    waiter_failed_ = true;
    log_warn("global fences: no waiter thread (%s); delivering from virgl_renderer_poll only",
             e.what());
  }
}

void GlobalFences::waiter_main() {
  // Nothing may leave a thread of ours (std::terminate would end the VMM). Out of memory, the
  // loop starts again a slice later; anything else ends the waiter, and the VMM's own calls
  // (check(), from its poll timer) deliver from then on.
  for (;;) {
    try {
      waiter_loop();
      return;
    } catch (const std::bad_alloc &) {
      std::this_thread::sleep_for(std::chrono::nanoseconds(kWaitSliceNs));
    } catch (...) {
      std::lock_guard lk(mu_);
      waiter_failed_ = true;
      return;
    }
  }
}

void GlobalFences::waiter_loop() {
  std::unique_lock lk(mu_);
  while (!stopping_) {
    if (const auto target = collect_locked()) {
      lk.unlock();
      deliver(target);
      lk.lock();
      continue;
    }
    // Sleep while the oldest fence waits for nothing of ours (the real library's part arrives
    // by callback, new fences by add()).
    if (entries_.empty() || prune(entries_.front().work)) {
      cv_.wait(lk);
      continue;
    }
    std::vector<WorkSnapshot> work = entries_.front().work;  // waited on without the lock
    lk.unlock();
    const int64_t deadline = monotonic_ns() + kWaitSliceNs;
    for (auto &w : work)
      if (!w.wait(deadline)) break;
    lk.lock();
  }
}

}  // namespace rvgl::hooks
