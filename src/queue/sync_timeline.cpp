#include "queue/sync_timeline.h"

namespace rvgl {

std::shared_ptr<SyncTimeline> SyncTimeline::create(std::shared_ptr<AmdgpuDevice> dev, int *err) {
  uint32_t h;
  *err = dev->syncobj_create(0, &h);
  if (*err) return nullptr;
  return std::shared_ptr<SyncTimeline>(new SyncTimeline(std::move(dev), h));
}

SyncTimeline::~SyncTimeline() { dev_->syncobj_destroy(handle_); }

uint64_t SyncTimeline::value() const {
  uint64_t v = 0;
  return dev_->syncobj_query(handle_, &v) ? 0 : v;
}

}  // namespace rvgl
