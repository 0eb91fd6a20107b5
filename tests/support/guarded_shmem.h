// A shared page with an inaccessible page on each side and a known fill pattern, so a test can
// prove the host wrote nothing outside what it was allowed to.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <stdexcept>

#include "rocm_virgl_protocol.h"

namespace rvgl::test {

class GuardedShmem {
 public:
  static constexpr uint8_t kFill = 0xa5;

  GuardedShmem() {
    page_ = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    total_ = RVGL_SHMEM_SIZE + 2 * page_;
    void *p = mmap(nullptr, total_, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::runtime_error("mmap");
    region_ = static_cast<uint8_t *>(p);
    if (mprotect(region_ + page_, RVGL_SHMEM_SIZE, PROT_READ | PROT_WRITE))
      throw std::runtime_error("mprotect");
    std::memset(base(), kFill, RVGL_SHMEM_SIZE);
  }
  ~GuardedShmem() { munmap(region_, total_); }
  GuardedShmem(const GuardedShmem &) = delete;
  GuardedShmem &operator=(const GuardedShmem &) = delete;

  uint8_t *base() const { return region_ + page_; }
  uint8_t *rsp_area() const { return base() + RVGL_RSP_AREA_OFFSET; }

  // Number of bytes in [begin, end) of the page that differ from the fill pattern.
  size_t changed(size_t begin, size_t end) const {
    size_t n = 0;
    for (size_t i = begin; i < end; ++i)
      n += base()[i] != kFill;
    return n;
  }

 private:
  uint8_t *region_ = nullptr;
  size_t page_ = 0;
  size_t total_ = 0;
};

}  // namespace rvgl::test
