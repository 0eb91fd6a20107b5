#include "interpose/fd_ops.h"

#include <fcntl.h>
#include <sys/mman.h>

#include <cerrno>
#include <memory>
#include <vector>

#include "core/counters.h"
#include "core/device_file.h"
#include "core/emulator.h"
#include "interpose/real_libc.h"
#include "ioctl/dispatch.h"
#include "memory/mmap_registry.h"
#include "util/kernel_call.h"
#include "util/user_memory.h"

namespace rvgl::emu::ops {

namespace {

// Keeps errno across the release of an emulator object (which may join worker threads).
void release_keeping_errno(std::shared_ptr<OpenFile> &f) {
  const int err = errno;
  f.reset();
  errno = err;
}

}  // namespace

int close_fd(int fd) {
  KernelCall kernel_call;
  std::shared_ptr<OpenFile> f;
  if (Emulator *e = Emulator::peek()) {
    std::lock_guard lk(e->mutex());
    f = e->fds().take(fd);
  }
  const int r = real::close(fd);
  release_keeping_errno(f);  // may stop user-queue workers: never under the state lock
  return r;
}

int close_fd_range(unsigned first, unsigned last, int flags) {
  KernelCall kernel_call;
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
      e->fds().forget_eventfds(first, last);
    }
  const int r = real::close_range(first, last, flags);
  const int err = errno;
  gone.clear();
  errno = err;
  return r;
}

void before_replace(int to) {
  KernelCall kernel_call;
  if (Emulator *e = Emulator::peek()) {
    std::lock_guard lk(e->mutex());
    e->fds().forget_eventfd(to);
  }
}

void retrack_fd(int from, int to) {
  KernelCall kernel_call;
  Emulator *e = Emulator::peek();
  if (!e || to < 0 || from == to) return;
  std::shared_ptr<OpenFile> previous;
  {
    std::lock_guard lk(e->mutex());
    previous = e->fds().take(to);
    if (auto f = e->fds().get(from)) e->fds().set(to, std::move(f));
  }
  release_keeping_errno(previous);
}

int ioctl_fd(int fd, unsigned long request, void *arg, const void *caller_frame) {
  KernelCall kernel_call;
  std::shared_ptr<OpenFile> f;
  if (Emulator *e = Emulator::peek()) f = e->fds().get(fd);
  if (!f) return real::ioctl(fd, request, arg);
  const int saved = errno;
  CallerStackScope stack(caller_frame);
  const int r = dispatch_ioctl(f, request, arg);
  if (r < 0) {
    errno = -r;
    return -1;
  }
  errno = saved;
  return r;
}

void *mmap_fd(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
  KernelCall kernel_call;
  Emulator *e = Emulator::peek();
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

}  // namespace rvgl::emu::ops
