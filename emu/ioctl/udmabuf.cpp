#include "ioctl/udmabuf.h"

#include <fcntl.h>
#include <linux/udmabuf.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <map>
#include <unordered_map>
#include <vector>

#include "core/emulator.h"
#include "core/runtime_knobs.h"
#include "interpose/real_libc.h"
#include "memory/backing.h"
#include "util/user_memory.h"

namespace rvgl::emu {

namespace {

constexpr uint64_t kPage = 4096;

void spin_for_ns(uint64_t ns) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::nanoseconds(ns);
  while (std::chrono::steady_clock::now() < until) {
  }
}

int create(uint32_t flags, const std::vector<udmabuf_create_item> &items) {
  if (flags & ~UDMABUF_FLAGS_CLOEXEC) return -EINVAL;
  const uint64_t page_limit = (knobs().udmabuf_size_limit_mb.load() << 20) / kPage;
  uint64_t pages = 0;
  for (const auto &it : items) {
    if ((it.offset | it.size) & (kPage - 1)) return -EINVAL;
    pages += it.size / kPage;
    if (pages > page_limit) return -EINVAL;
  }
  if (pages == 0) return -EINVAL;

  // check_memfd_seals() and the size check are per item in the kernel, on a file it already holds;
  // here each distinct fd number is looked at once per call (an fstat and F_GET_SEALS), so the
  // cost per item is a lookup: a list of single pages of one memfd is the common shape. One handle
  // per distinct memfd (by inode) keeps the pages alive as the kernel's pinning does.
  struct FileInfo {
    int error;  // 0, or what every item on this fd fails with
    uint64_t size;
    std::shared_ptr<UniqueFd> handle;
  };
  std::unordered_map<int, FileInfo> by_fd;
  std::map<std::pair<dev_t, ino_t>, std::shared_ptr<UniqueFd>> files;
  auto inspect = [&](int fd) -> const FileInfo & {
    auto [it, fresh] = by_fd.try_emplace(fd, FileInfo{0, 0, nullptr});
    if (!fresh) return it->second;
    FileInfo &fi = it->second;
    struct stat st;
    if (fd < 0 || real::fstat(fd, &st) != 0) {
      fi.error = -EBADF;
      return fi;
    }
    const int seals = real::fcntl(fd, F_GET_SEALS, nullptr);
    if (seals < 0) {
      fi.error = -EBADFD;  // not shmem
      return fi;
    }
    if (!(seals & F_SEAL_SHRINK) || (seals & (F_SEAL_WRITE | F_SEAL_FUTURE_WRITE))) {
      fi.error = -EINVAL;
      return fi;
    }
    // Shrink-sealed: the size can only grow, so the one read here bounds every item.
    fi.size = static_cast<uint64_t>(st.st_size);
    auto &file = files[{st.st_dev, st.st_ino}];
    if (!file) {
      file = std::make_shared<UniqueFd>(real::fcntl(fd, F_DUPFD_CLOEXEC, nullptr));
      if (!*file) fi.error = -errno;
    }
    fi.handle = file;
    return fi;
  };
  std::vector<SegmentBacking::Segment> segments;
  for (const auto &it : items) {
    const FileInfo &fi = inspect(static_cast<int>(it.memfd));
    if (fi.error) return fi.error;
    if (it.offset + it.size < it.offset || it.offset + it.size > fi.size) return -EINVAL;
    // Items that continue the previous piece of the same file are one mapping.
    if (!segments.empty() && segments.back().file == fi.handle &&
        segments.back().offset + segments.back().size == it.offset)
      segments.back().size += it.size;
    else
      segments.push_back({fi.handle, it.offset, it.size});
  }
  // The kernel pins every page it hands out (udmabuf_create(): memfd_pin_folios() per item since
  // Linux 6.11, shmem_read_mapping_page() per page before), CPU work in the caller's thread that
  // this emulator does not do: it only keeps the memfds. RVGL_EMU_UDMABUF_PAGE_NS charges that
  // work per page, as a busy wait, for figures that must include it (bench/: BM_KernelPagePin
  // measures the host kernel's pinning); 0 by default, so nothing else pays for it.
  if (const uint64_t ns = knobs().udmabuf_page_ns.load(std::memory_order_relaxed))
    spin_for_ns(pages * ns);
  // The fd handed out: a memfd of the right size (so lseek(SEEK_END) answers), whose mmap and
  // import the emulator redirects to the pieces.
  const unsigned mfd_flags = (flags & UDMABUF_FLAGS_CLOEXEC) ? MFD_CLOEXEC : 0;
  const int fd = memfd_create("rvgl-udmabuf", mfd_flags);
  if (fd < 0) return -errno;
  if (ftruncate(fd, static_cast<off_t>(pages * kPage)) != 0) {
    const int err = errno;
    real::close(fd);
    return -err;
  }
  UniqueFd handle(real::fcntl(fd, F_DUPFD_CLOEXEC, nullptr));
  auto backing = SegmentBacking::create(std::move(segments), std::move(handle));
  Emulator &emu = Emulator::get();
  std::lock_guard lk(emu.mutex());
  emu.fds().set(fd, std::make_shared<UdmabufFile>(std::move(backing)));
  return fd;
}

}  // namespace

int udmabuf_create(void *user_arg) {
  struct udmabuf_create c;
  if (copy_from_user(&c, reinterpret_cast<uint64_t>(user_arg), sizeof(c))) return -EFAULT;
  return create(c.flags, {udmabuf_create_item{c.memfd, 0, c.offset, c.size}});
}

int udmabuf_create_list(void *user_arg) {
  struct udmabuf_create_list head;
  const uint64_t base = reinterpret_cast<uint64_t>(user_arg);
  if (copy_from_user(&head, base, sizeof(head))) return -EFAULT;
  if (head.count > knobs().udmabuf_list_limit.load()) return -EINVAL;
  std::vector<udmabuf_create_item> items(head.count);
  if (copy_from_user(items.data(), base + sizeof(head), items.size() * sizeof(udmabuf_create_item)))
    return -EFAULT;
  return create(head.flags, items);
}

}  // namespace rvgl::emu
