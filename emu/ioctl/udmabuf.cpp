#include "ioctl/udmabuf.h"

#include <fcntl.h>
#include <linux/udmabuf.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <map>
#include <vector>

#include "core/emulator.h"
#include "core/runtime_knobs.h"
#include "interpose/real_libc.h"
#include "memory/backing.h"
#include "util/user_memory.h"

namespace rvgl::emu {

namespace {

constexpr uint64_t kPage = 4096;

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

  // One handle per distinct memfd (by inode) keeps the pages alive as the kernel's pinning does.
  std::map<std::pair<dev_t, ino_t>, std::shared_ptr<UniqueFd>> files;
  std::vector<SegmentBacking::Segment> segments;
  for (const auto &it : items) {
    const int fd = static_cast<int>(it.memfd);
    struct stat st;
    if (fd < 0 || real::fstat(fd, &st) != 0) return -EBADF;
    // check_memfd_seals(): shmem files only, shrink-sealed, not write-sealed.
    const int seals = real::fcntl(fd, F_GET_SEALS, nullptr);
    if (seals < 0) return -EBADFD;
    if (!(seals & F_SEAL_SHRINK) || (seals & (F_SEAL_WRITE | F_SEAL_FUTURE_WRITE))) return -EINVAL;
    if (it.offset + it.size < it.offset || it.offset + it.size > static_cast<uint64_t>(st.st_size))
      return -EINVAL;
    auto &file = files[{st.st_dev, st.st_ino}];
    if (!file) {
      file = std::make_shared<UniqueFd>(real::fcntl(fd, F_DUPFD_CLOEXEC, nullptr));
      if (!*file) return -errno;
    }
    segments.push_back({file, it.offset, it.size});
  }
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
