#include "amdgpu/kept_room.h"

#include <new>
#include <utility>

namespace rvgl {

KeptRoom KeptRoom::make(std::shared_ptr<AmdgpuDevice> dev, size_t n) {
  KeptRoom room;
  if (!dev || !dev->reserve_kept(n)) return room;
  room.dev_ = std::move(dev);
  room.left_ = n;
  return room;
}

KeptRoom::KeptRoom(KeptRoom &&o) noexcept
    : dev_(std::move(o.dev_)), left_(std::exchange(o.left_, 0)) {}

KeptRoom &KeptRoom::operator=(KeptRoom &&o) noexcept {
  if (this != &o) {
    give_back();
    dev_ = std::move(o.dev_);
    left_ = std::exchange(o.left_, 0);
  }
  return *this;
}

KeptRoom::~KeptRoom() {
  give_back();
}

void KeptRoom::give_back() noexcept {
  if (dev_ && left_) dev_->unreserve_kept(left_);
  left_ = 0;
  dev_.reset();
}

void KeptRoom::keep(std::shared_ptr<const void> what) noexcept {
  if (!what) return;
  if (!dev_ || left_ == 0) {
    // A caller's bug. Freeing it could let the kernel write into memory reused for something
    // else, a leak cannot; only when even this small allocation fails does it go.
    new (std::nothrow) std::shared_ptr<const void>(std::move(what));
    return;
  }
  --left_;
  dev_->keep_reserved(std::move(what));
}

}  // namespace rvgl
