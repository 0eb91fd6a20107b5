// What a pending fence waits on: something whose progress is a monotonically increasing point
// (a GPU timeline, the event ring's record count, an SPM session's completed SET_DESTs).
#pragma once

#include <cstdint>

namespace rvgl {

class FenceSource {
 public:
  // The highest point known to be reached; any thread, never blocks, never issues an ioctl.
  virtual uint64_t reached() const = 0;

 protected:
  ~FenceSource() = default;
};

}  // namespace rvgl
