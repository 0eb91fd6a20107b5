#include "queue/reset_probe.h"

#include <utility>

namespace rvgl {

ResetProbe::ResetProbe(std::shared_ptr<AmdgpuDevice> dev) : dev_(std::move(dev)) {
  err_ = dev_->ctx_create(AMDGPU_CTX_PRIORITY_NORMAL, &ctx_id_);
}

ResetProbe::~ResetProbe() {
  if (!err_) dev_->ctx_free(ctx_id_);
}

ResetProbe::Answer ResetProbe::ask() {
  if (err_) return Answer::kUnknown;
  bool reset = false;
  if (dev_->ctx_query_reset(ctx_id_, &reset) != 0) return Answer::kUnknown;
  return reset ? Answer::kReset : Answer::kNoReset;
}

}  // namespace rvgl
