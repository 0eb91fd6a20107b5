#include "amdgpu/procmap_query.h"

#include <fcntl.h>
#include <sys/ioctl.h>

#include <cerrno>

#include "amdgpu/uapi/procmap_query_uapi.h"

namespace rvgl {

namespace {

using uapi::kProcmapQuery;
using uapi::kVmaShared;
using uapi::kVmaWritable;
using uapi::ProcmapQueryArg;

}  // namespace

ProcmapQuery ProcmapQuery::open() {
  ProcmapQuery q;
  q.fd_.reset(::open("/proc/self/maps", O_RDONLY | O_CLOEXEC));
  return q;
}

int ProcmapQuery::covering(uint64_t addr, ProcVma *out) const {
  ProcmapQueryArg q{};
  q.size = sizeof(q);
  q.query_addr = addr;  // no flags: the VMA covering addr, or ENOENT
  if (::ioctl(fd_.get(), kProcmapQuery, &q) != 0) {
    // An older kernel answers ENOTTY (no such ioctl on the seq file); EINVAL would be a
    // struct size it does not know, which for our purposes is the same.
    if (errno == ENOTTY || errno == EINVAL) return -ENOTTY;
    return -errno;
  }
  *out = ProcVma{q.vma_start,
                 q.vma_end,
                 q.vma_offset,
                 q.dev_major,
                 q.dev_minor,
                 q.inode,
                 (q.vma_flags & kVmaShared) != 0,
                 (q.vma_flags & kVmaWritable) != 0};
  return 0;
}

}  // namespace rvgl
