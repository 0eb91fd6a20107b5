#include "amdgpu/procmap_query.h"

#include <fcntl.h>
#include <sys/ioctl.h>

#include <cerrno>

namespace rvgl {

namespace {

// struct procmap_query and its flags, as include/uapi/linux/fs.h (Linux 6.11) defines them and
// fs/proc/task_mmu.c do_procmap_query() fills them; the Debian 12 headers predate it.
struct ProcmapQueryArg {
  uint64_t size;
  uint64_t query_flags;
  uint64_t query_addr;
  uint64_t vma_start;
  uint64_t vma_end;
  uint64_t vma_flags;
  uint64_t vma_page_size;
  uint64_t vma_offset;
  uint64_t inode;
  uint32_t dev_major;
  uint32_t dev_minor;
  uint32_t vma_name_size;
  uint32_t build_id_size;
  uint64_t vma_name_addr;
  uint64_t build_id_addr;
};
static_assert(sizeof(ProcmapQueryArg) == 104);
constexpr unsigned long kProcmapQuery = _IOWR('f', 17, ProcmapQueryArg);
constexpr uint64_t kVmaShared = 0x08;  // PROCMAP_QUERY_VMA_SHARED

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
                 (q.vma_flags & kVmaShared) != 0};
  return 0;
}

}  // namespace rvgl
