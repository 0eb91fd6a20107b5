#include "queue/kernel_bo_list.h"

namespace rvgl {

KernelBoList::~KernelBoList() {
  destroy();
}

void KernelBoList::destroy() {
  if (handle_) dev_->bo_list_destroy(handle_);
  handle_ = 0;
  synced_generation_ = kNever;  // a later sync() makes a new list of whatever is resident then
}

int KernelBoList::sync(ResidentSet &set, uint32_t *handle) {
  if (set.generation() == synced_generation_) {
    *handle = set.size() ? handle_ : 0;
    return 0;
  }
  const auto entries = set.entries();
  if (entries.empty()) {
    // Drop the kernel's references now: an unmapped object must not stay alive through the list.
    if (handle_) dev_->bo_list_destroy(handle_);
    handle_ = 0;
  } else if (handle_) {
    if (int err = dev_->bo_list_update(handle_, entries)) return err;
  } else {
    if (int err = dev_->bo_list_create(entries, &handle_)) return err;
  }
  ++updates_;
  synced_generation_ = set.generation();
  *handle = handle_;
  return 0;
}

}  // namespace rvgl
