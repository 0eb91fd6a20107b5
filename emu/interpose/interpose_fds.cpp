// libc entry points that take an fd. The emulator's fds are found through a lock-free map; for any
// other fd these are a single check and a call through to libc.
// These definitions must keep libc's own symbol names: with _FILE_OFFSET_BITS=64 the headers
// would rename open to open64, stat to stat64 and so on.
#undef _FILE_OFFSET_BITS
#undef _FORTIFY_SOURCE
#include <fcntl.h>
#include <stdarg.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

#include "core/counters.h"
#include "core/device_file.h"
#include "core/emulator.h"
#include "interpose/real_libc.h"
#include "ioctl/dispatch.h"
#include "memory/mmap_registry.h"

using namespace rvgl::emu;

namespace {

Emulator *tracking(int fd) {
  Emulator *e = Emulator::peek();
  return e && e->fds().maybe_tracked(fd) ? e : nullptr;
}

// After a successful duplication, the new fd denotes the same emulator object (and no longer
// whatever `to` denoted before: dup2/dup3 closed it). Returns that previous object, to be released
// by the caller outside the lock.
std::shared_ptr<OpenFile> retrack(int from, int to) {
  Emulator *e = Emulator::peek();
  if (!e || to < 0) return nullptr;
  const bool from_ours = e->fds().maybe_tracked(from), to_ours = e->fds().maybe_tracked(to);
  if (!from_ours && !to_ours) return nullptr;
  std::lock_guard lk(e->mutex());
  auto previous = e->fds().take(to);
  if (auto f = e->fds().get(from)) e->fds().set(to, std::move(f));
  return previous;
}

void copy_tracking(int from, int to) {
  retrack(from, to);
}

// The object previously at `fd`, removed from the table (released by the caller, unlocked).
std::shared_ptr<OpenFile> untrack(int fd) {
  Emulator *e = tracking(fd);
  if (!e) return nullptr;
  std::lock_guard lk(e->mutex());
  return e->fds().take(fd);
}

void *do_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
  Emulator *e = fd >= 0 ? tracking(fd) : nullptr;
  if (!e) return real::mmap(addr, len, prot, flags, fd, off);
  std::shared_ptr<Backing> backing;
  uint64_t inner = static_cast<uint64_t>(off);
  {
    std::lock_guard lk(e->mutex());
    auto f = e->fds().get(fd);
    if (!f) return real::mmap(addr, len, prot, flags, fd, off);
    if (f->kind() == OpenFile::Kind::Device) {
      if (int err = e->faults().on_call("MMAP")) {
        counters().injected_failures.fetch_add(1, std::memory_order_relaxed);
        errno = err;
        return MAP_FAILED;
      }
      const uint64_t rounded = (static_cast<uint64_t>(len) + 4095) & ~uint64_t{4095};
      auto bo = mmap_registry().find(static_cast<uint64_t>(off), rounded, inner);
      if (!bo) {
        errno = EINVAL;
        return MAP_FAILED;
      }
      // drm_vma_node_is_allowed(): only a file holding a handle to the object may map it.
      if (!static_cast<DeviceFile &>(*f).bo_handles.count(bo.get())) {
        errno = EACCES;
        return MAP_FAILED;
      }
      backing = bo->backing();
    } else if (f->kind() == OpenFile::Kind::Udmabuf) {
      backing = static_cast<UdmabufFile &>(*f).backing;
    } else {
      return real::mmap(addr, len, prot, flags, fd, off);
    }
  }
  // GEM and udmabuf mappings must be shared: a private (copy-on-write) one is refused.
  if (!(flags & MAP_SHARED)) {
    errno = EINVAL;
    return MAP_FAILED;
  }
  return backing->cpu_map(addr, len, prot, flags, inner);
}

}  // namespace

extern "C" {

int close(int fd) {
  auto f = untrack(fd);
  const int r = real::close(fd);
  const int err = errno;
  f.reset();  // may stop user-queue workers: never under the state lock
  errno = err;
  return r;
}

int close_range(unsigned first, unsigned last, int flags) noexcept {
  std::vector<std::shared_ptr<OpenFile>> gone;
  if (!(flags & CLOSE_RANGE_CLOEXEC))
    if (Emulator *e = Emulator::peek()) {
      std::lock_guard lk(e->mutex());
      std::vector<int> fds;
      e->fds().for_each([&](int fd, const auto &) {
        if (static_cast<unsigned>(fd) >= first && static_cast<unsigned>(fd) <= last)
          fds.push_back(fd);
      });
      for (int fd : fds)
        gone.push_back(e->fds().take(fd));
    }
  const int r = real::close_range(first, last, flags);
  const int err = errno;
  gone.clear();
  errno = err;
  return r;
}

int dup(int fd) noexcept {
  const int r = real::dup(fd);
  if (r >= 0) copy_tracking(fd, r);
  return r;
}

int dup2(int fd, int to) noexcept {
  const int r = real::dup2(fd, to);
  if (r >= 0 && fd != to) {
    const int err = errno;
    retrack(fd, to);  // the previous object of `to` is released here, unlocked
    errno = err;
  }
  return r;
}

int dup3(int fd, int to, int flags) noexcept {
  const int r = real::dup3(fd, to, flags);
  if (r >= 0) {
    const int err = errno;
    retrack(fd, to);
    errno = err;
  }
  return r;
}

int fcntl(int fd, int cmd, ...) {
  va_list ap;
  va_start(ap, cmd);
  void *arg = va_arg(ap, void *);
  va_end(ap);
  const int r = real::fcntl(fd, cmd, arg);
  if (r >= 0 && (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC)) copy_tracking(fd, r);
  return r;
}

int fcntl64(int fd, int cmd, ...) {
  va_list ap;
  va_start(ap, cmd);
  void *arg = va_arg(ap, void *);
  va_end(ap);
  const int r = real::fcntl(fd, cmd, arg);
  if (r >= 0 && (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC)) copy_tracking(fd, r);
  return r;
}

int ioctl(int fd, unsigned long request, ...) noexcept {
  va_list ap;
  va_start(ap, request);
  void *arg = va_arg(ap, void *);
  va_end(ap);
  if (Emulator *e = tracking(fd)) {
    std::shared_ptr<OpenFile> f;
    {
      std::lock_guard lk(e->mutex());
      f = e->fds().get(fd);
    }
    if (f) {
      const int saved = errno;
      const int r = dispatch_ioctl(f, request, arg);
      if (r < 0) {
        errno = -r;
        return -1;
      }
      errno = saved;
      return r;
    }
  }
  return real::ioctl(fd, request, arg);
}

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off) noexcept {
  return do_mmap(addr, len, prot, flags, fd, off);
}

void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off64_t off) noexcept {
  return do_mmap(addr, len, prot, flags, fd, static_cast<off_t>(off));
}

}  // extern "C"
