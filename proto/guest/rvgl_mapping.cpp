#include "rvgl_mapping.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace rvgl::guest {

Result<Mapping> Mapping::map_shared(int fd, size_t size) {
  if (fd < 0) return make_error(-EBADF, "map: no fd");
  if (size == 0) return make_error(-EINVAL, "map: size 0");
  // lseek(SEEK_END) reports the size of memfds and dma-bufs alike (fstat gives 0 for dma-bufs).
  const off_t end = ::lseek(fd, 0, SEEK_END);
  if (end < 0) return make_error(-errno, std::string("map: lseek: ") + std::strerror(errno));
  if (static_cast<uint64_t>(end) < size)
    return make_error(-EINVAL, "map: the host's fd holds " + std::to_string(end) +
                                   " bytes, fewer than the " + std::to_string(size) + " asked");
  void *p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return make_error(-errno, std::string("map: mmap: ") + std::strerror(errno));
  return Mapping(static_cast<uint8_t *>(p), size);
}

void Mapping::reset() {
  if (data_) ::munmap(data_, size_);
  data_ = nullptr;
  size_ = 0;
}

}  // namespace rvgl::guest
