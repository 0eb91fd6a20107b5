#include "log_limit.h"

namespace rvgl::hooks {

bool LogLimit::allow(int64_t now_ns, uint32_t *left_out) {
  std::lock_guard lk(mu_);
  *left_out = 0;
  if (!started_ || now_ns - begin_ns_ >= kIntervalNs) {
    *left_out = refused_;
    started_ = true;
    begin_ns_ = now_ns;
    passed_ = 0;
    refused_ = 0;
  }
  if (passed_ < kBurst) {
    ++passed_;
    return true;
  }
  if (refused_ < UINT32_MAX) ++refused_;
  return false;
}

}  // namespace rvgl::hooks
