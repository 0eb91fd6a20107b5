// PRIME: amdgpu objects out as dma-buf fds and dma-bufs (ours, another node's, a udmabuf) back in
// as objects (drm_prime.c, amdgpu_dma_buf.c).
#include <amdgpu_drm.h>
#include <drm.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/counters.h"
#include "core/device.h"
#include "core/emulator.h"
#include "interpose/real_libc.h"
#include "ioctl/handlers.h"

namespace rvgl::emu {

namespace {

// The memfd name every exported object carries, so a dma-buf that left the process and came back
// (SCM_RIGHTS) is still recognised as one.
constexpr char kBoMemfdLink[] = "/memfd:rvgl-bo (deleted)";

uint32_t import_foreign(DeviceFile &f, std::shared_ptr<Backing> backing,
                        std::shared_ptr<BufferObject> origin) {
  auto it = f.foreign_imports.find(backing.get());
  if (it != f.foreign_imports.end()) return it->second;
  BufferObject::Params p;
  p.device = f.device.index();
  p.size = backing->size();
  p.backing = backing;
  p.domains = AMDGPU_GEM_DOMAIN_GTT;
  p.imported = true;
  p.origin = std::move(origin);
  const Backing *key = backing.get();
  const uint32_t h = f.handle_for(std::make_shared<BufferObject>(std::move(p)));
  f.foreign_imports.emplace(key, h);
  return h;
}

// A dma-buf fd the emulator did not hand out in this process: accept it only if it is one of our
// objects' memfds that travelled.
std::shared_ptr<Backing> adopt_returning_dmabuf(int fd, int &err) {
  if (real::fcntl(fd, F_GETFD, nullptr) < 0) {
    err = -EBADF;
    return nullptr;
  }
  char link[64], buf[64];
  std::snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
  const ssize_t n = real::readlink(link, buf, sizeof(buf) - 1);
  if (n <= 0 || static_cast<size_t>(n) != sizeof(kBoMemfdLink) - 1 ||
      std::memcmp(buf, kBoMemfdLink, static_cast<size_t>(n)) != 0) {
    err = -EINVAL;  // dma_buf_get() refuses anything that is not a dma-buf
    return nullptr;
  }
  struct stat st;
  UniqueFd dup(real::fcntl(fd, F_DUPFD_CLOEXEC, nullptr));
  if (!dup || real::fstat(dup.get(), &st) != 0) {
    err = -EINVAL;
    return nullptr;
  }
  return MemfdBacking::adopt(std::move(dup), static_cast<uint64_t>(st.st_size));
}

}  // namespace

int drm_ioctl_prime_handle_to_fd(DeviceFile &f, void *data) {
  auto *a = static_cast<drm_prime_handle *>(data);
  if (a->flags & ~static_cast<uint32_t>(DRM_CLOEXEC | DRM_RDWR)) return -EINVAL;
  Emulator &emu = Emulator::get();
  std::lock_guard lk(emu.mutex());
  auto bo = f.bo(a->handle);
  if (!bo) return -ENOENT;
  // amdgpu_gem_prime_export(): userptr and per-VM objects cannot be shared.
  if (bo->userptr() || (bo->domain_flags() & AMDGPU_GEM_CREATE_VM_ALWAYS_VALID)) return -EPERM;
  auto exporter = bo->origin() ? bo->origin() : bo;
  const auto &backing = exporter->backing();
  const int src = backing->export_fd();
  if (src < 0) return -EPERM;
  const int cmd = (a->flags & DRM_CLOEXEC) ? F_DUPFD_CLOEXEC : F_DUPFD;
  const int fd = real::fcntl(src, cmd, nullptr);
  if (fd < 0) return -errno;
  if (backing->kind() == Backing::Kind::Segments)
    emu.fds().set(fd,
                  std::make_shared<UdmabufFile>(std::static_pointer_cast<SegmentBacking>(backing)));
  else
    emu.fds().set(fd, std::make_shared<DmaBufFile>(exporter));
  counters().dmabuf_exports.fetch_add(1, std::memory_order_relaxed);
  a->fd = fd;
  return 0;
}

int drm_ioctl_prime_fd_to_handle(DeviceFile &f, void *data) {
  auto *a = static_cast<drm_prime_handle *>(data);
  Emulator &emu = Emulator::get();
  std::lock_guard lk(emu.mutex());
  auto of = emu.fds().get(a->fd);
  uint32_t handle = 0;
  if (of && of->kind() == OpenFile::Kind::DmaBuf) {
    auto exporter = static_cast<DmaBufFile &>(*of).bo;
    // amdgpu_gem_prime_import(): a dma-buf of this very device is the same object again.
    if (exporter->device() == f.device.index())
      handle = f.handle_for(exporter);
    else
      handle = import_foreign(f, exporter->backing(), exporter);
  } else if (of && of->kind() == OpenFile::Kind::Udmabuf) {
    handle = import_foreign(f, static_cast<UdmabufFile &>(*of).backing, nullptr);
  } else if (of) {
    return -EINVAL;
  } else {
    int err = 0;
    auto backing = adopt_returning_dmabuf(a->fd, err);
    if (!backing) return err;
    handle = import_foreign(f, std::move(backing), nullptr);
  }
  counters().dmabuf_imports.fetch_add(1, std::memory_order_relaxed);
  a->handle = handle;
  return 0;
}

}  // namespace rvgl::emu
