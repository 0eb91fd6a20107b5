// The kernel fences of a queue's newest submissions, in a ring made with the queue: recording a
// job the kernel has accepted allocates nothing. A CS that succeeded must be counted whatever
// happens next: a job the host does not know it submitted is one it would not wait for before
// handing guest pages back, nor retire fences after (a growing std::deque could throw there).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>

namespace rvgl {

class RecentJobs {
 public:
  using Job = std::pair<uint64_t, uint64_t>;  // (seq, kernel handle)
  static constexpr size_t kCapacity = 256;

  // The oldest job goes once the ring is full.
  void push(uint64_t seq, uint64_t handle) noexcept {
    jobs_[(first_ + size_) % kCapacity] = {seq, handle};
    if (size_ < kCapacity)
      ++size_;
    else
      first_ = (first_ + 1) % kCapacity;
  }
  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }
  // i = 0 is the oldest kept; i < size().
  const Job &oldest(size_t i) const { return jobs_[(first_ + i) % kCapacity]; }
  // i = 0 is the newest; i < size().
  const Job &newest(size_t i) const { return oldest(size_ - 1 - i); }

 private:
  std::array<Job, kCapacity> jobs_{};
  size_t first_ = 0;
  size_t size_ = 0;
};

}  // namespace rvgl
