#include "rocm_resource.h"

#include <fcntl.h>
#include <sys/mman.h>

#include <cerrno>

namespace rvgl::hooks {

int RocmResource::dup_fd(UniqueFd *out) const {
  if (!fd_) return -EINVAL;
  UniqueFd d(fcntl(fd_.get(), F_DUPFD_CLOEXEC, 0));
  if (!d) return -errno;
  *out = std::move(d);
  return 0;
}

int RocmResource::map(void **addr, uint64_t *size) {
  // Like the real library: one mapping per resource, of the whole blob, read-write.
  if (mapping_.valid() || !mappable_fd()) return -EINVAL;
  mapping_ = Mapping::map_shared(fd_.get(), size_, PROT_READ | PROT_WRITE);
  if (!mapping_.valid()) return -EINVAL;
  *addr = mapping_.get();
  *size = size_;
  return 0;
}

int RocmResource::unmap() {
  if (!mapping_.valid()) return -EINVAL;
  mapping_.reset();
  return 0;
}

int RocmResource::map_fixed(void *addr) const {
  // The VMM owns this mapping (it placed it in its own window): nothing to keep here.
  if (!mappable_fd()) return -EOPNOTSUPP;
  void *p = mmap(addr, size_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd_.get(), 0);
  return p == MAP_FAILED ? -EINVAL : 0;
}

}  // namespace rvgl::hooks
