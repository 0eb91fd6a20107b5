#include "sync/fence.h"

#include <atomic>

namespace rvgl::emu {

std::shared_ptr<Fence> Fence::create() {
  return std::make_shared<Fence>();
}

std::shared_ptr<Fence> Fence::create(uint64_t context) {
  auto f = std::make_shared<Fence>();
  f->context_ = context;
  return f;
}

uint64_t Fence::new_context() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

std::shared_ptr<Fence> Fence::signaled(int error) {
  auto f = std::make_shared<Fence>();
  f->error_ = error;
  f->signaled_.store(true, std::memory_order_release);
  return f;
}

std::shared_ptr<Fence> Fence::all_of(const std::vector<std::shared_ptr<Fence>> &fences) {
  if (fences.empty()) return signaled();
  if (fences.size() == 1) return fences.front();
  auto out = create();
  struct State {
    std::atomic<size_t> left;
    std::atomic<int> error{0};
  };
  auto st = std::make_shared<State>();
  st->left = fences.size();
  for (const auto &f : fences) {
    std::weak_ptr<Fence> wf = f;
    f->on_signal([st, out, wf] {
      if (auto src = wf.lock()) {
        const int e = src->error();
        int expected = 0;
        if (e) st->error.compare_exchange_strong(expected, e);
      }
      if (st->left.fetch_sub(1) == 1) out->signal(st->error.load());
    });
  }
  return out;
}

namespace {

// A std::function as a fence callback, for the waits that are not on a hot path.
class FunctionCallback final : public FenceCallback {
 public:
  explicit FunctionCallback(std::function<void()> fn) : fn_(std::move(fn)) {}
  void signaled() override { fn_(); }

 private:
  std::function<void()> fn_;
};

}  // namespace

void Fence::release_chain(FenceCallback *cb, bool run) {
  while (cb) {
    std::unique_ptr<FenceCallback> node(cb);
    cb = cb->next_;
    if (run) node->signaled();
  }
}

Fence::~Fence() {
  // Unsignaled (its job was dropped with the process's last reference): nothing waits any more.
  release_chain(first_cb_, false);
}

void Fence::on_signal_locked(std::unique_ptr<FenceCallback> cb) {
  FenceCallback *node = cb.release();
  if (last_cb_)
    last_cb_->next_ = node;
  else
    first_cb_ = node;
  last_cb_ = node;
}

void Fence::signal(int error) {
  FenceCallback *cbs;
  {
    std::lock_guard lk(FenceDomain::mutex());
    if (signaled_.load(std::memory_order_relaxed)) return;
    error_ = error;
    signaled_.store(true, std::memory_order_release);
    cbs = first_cb_;
    first_cb_ = last_cb_ = nullptr;
    waiters_.wake_all_locked();
  }
  release_chain(cbs, true);
}

bool Fence::is_signaled() const {
  return signaled_.load(std::memory_order_acquire);
}

int Fence::error() const {
  std::lock_guard lk(FenceDomain::mutex());
  return error_;
}

void Fence::on_signal(std::function<void()> cb) {
  {
    std::lock_guard lk(FenceDomain::mutex());
    if (!is_signaled_locked()) {
      on_signal_locked(std::make_unique<FunctionCallback>(std::move(cb)));
      return;
    }
  }
  cb();
}

bool Fence::wait(Deadline d) const {
  std::unique_lock lk(FenceDomain::mutex());
  // The caller holds a reference: no keep-alive needed.
  return FenceDomain::wait_until(
      lk, d, [this] { return is_signaled_locked(); },
      [this](Waiter &w) { w.subscribe_locked(waiters_, nullptr); });
}

void Fence::subscribe_locked(Waiter &w, const std::shared_ptr<Fence> &f) {
  if (f && !f->is_signaled_locked()) w.subscribe_locked(f->waiters_, f);
}

}  // namespace rvgl::emu
