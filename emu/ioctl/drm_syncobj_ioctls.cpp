// DRM sync objects (drivers/gpu/drm/drm_syncobj.c): binary and timeline, waits with absolute
// CLOCK_MONOTONIC timeouts, export/import as syncobj fds and sync_file fds.
#include <drm.h>
#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "core/counters.h"
#include "core/emulator.h"
#include "interpose/real_libc.h"
#include "ioctl/drm_uapi_ext.h"
#include "ioctl/handlers.h"
#include "sync/fence.h"
#include "sync/syncobj.h"
#include "util/user_memory.h"

namespace rvgl::emu {

namespace {

// Newer than libdrm 2.4.114's drm.h: DRM_SYNCOBJ_WAIT_FLAGS_WAIT_DEADLINE (drm.h, Linux 6.5).
constexpr uint32_t kWaitDeadline = 1u << 3;
constexpr uint32_t kWaitFlags = DRM_SYNCOBJ_WAIT_FLAGS_WAIT_ALL |
                                DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT |
                                DRM_SYNCOBJ_WAIT_FLAGS_WAIT_AVAILABLE | kWaitDeadline;
// drm_syncobj_find_fence() gives WAIT_FOR_SUBMIT this long when a caller cannot block forever.
constexpr auto kSubmitWait = std::chrono::seconds(5);

// Looks the handles up under the file's syncobj table lock alone, as drm_syncobj_find() takes only
// file_private->syncobj_table_lock (drivers/gpu/drm/drm_syncobj.c): a wait, query or signal never
// waits for a CS, which holds the state lock throughout. -ENOENT for any unknown handle.
int lookup(DeviceFile &f, const std::vector<uint32_t> &handles,
           std::vector<std::shared_ptr<Syncobj>> &out) {
  out.clear();
  for (uint32_t h : handles) {
    auto s = f.syncobjs.get(h);
    if (!s) return -ENOENT;
    out.push_back(std::move(s));
  }
  return 0;
}

int copy_handles(uint64_t ptr, uint32_t count, std::vector<uint32_t> &out) {
  if (count == 0) return -EINVAL;
  if (count > (1u << 20)) return -ENOMEM;
  out.resize(count);
  return copy_from_user(out.data(), ptr, count * sizeof(uint32_t));
}

int copy_points(uint64_t ptr, uint32_t count, std::vector<uint64_t> &out) {
  out.resize(count);
  return copy_from_user(out.data(), ptr, count * sizeof(uint64_t));
}

int wait_common(DeviceFile &f, uint64_t handles_ptr, const uint64_t *points_ptr, uint32_t count,
                uint32_t flags, int64_t timeout_ns, uint32_t *first_signaled) {
  if (flags & ~kWaitFlags) return -EINVAL;
  std::vector<uint32_t> handles;
  if (int r = copy_handles(handles_ptr, count, handles)) return r;
  std::vector<uint64_t> points(count, 0);
  if (points_ptr && copy_points(*points_ptr, count, points)) return -EFAULT;
  std::vector<std::shared_ptr<Syncobj>> objs;
  if (int r = lookup(f, handles, objs)) return r;
  const Deadline deadline = deadline_from_abs_ns(timeout_ns);
  const bool all = flags & DRM_SYNCOBJ_WAIT_FLAGS_WAIT_ALL;
  const bool available_only = flags & DRM_SYNCOBJ_WAIT_FLAGS_WAIT_AVAILABLE;
  std::unique_lock lk(FenceDomain::mutex());
  if (!(flags & DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT))
    for (uint32_t i = 0; i < count; ++i)
      if (!objs[i]->available_locked(points[i])) return -EINVAL;
  auto ready = [&](uint32_t i) {
    return available_only ? objs[i]->available_locked(points[i])
                          : objs[i]->signaled_locked(points[i]);
  };
  uint32_t first = ~0u;
  for (uint32_t i = 0; i < count && first == ~0u; ++i)
    if (ready(i)) first = i;
  const bool ok = FenceDomain::wait_until(
      lk, deadline,
      [&] {
        for (uint32_t i = 0; i < count; ++i) {
          if (ready(i)) {
            if (!all) {
              first = std::min(first, i);
              return true;
            }
          } else if (all) {
            return false;
          }
        }
        return all;
      },
      [&](Waiter &w) {
        for (uint32_t i = 0; i < count; ++i)
          if (!ready(i)) Syncobj::subscribe_locked(w, objs[i], points[i]);
      });
  if (!ok) return -ETIME;
  *first_signaled = first;
  return 0;
}

}  // namespace

int make_sync_file_fd(std::shared_ptr<Fence> fence) {
  const int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (fd < 0) return -errno;
  // Our own handle on the eventfd, kept by the callback until the fence signals.
  auto writer = std::make_shared<UniqueFd>(real::fcntl(fd, F_DUPFD_CLOEXEC, nullptr));
  Emulator::get().fds().set(fd, std::make_shared<SyncFileFile>(fence));
  fence->on_signal([writer] {
    const uint64_t one = 1;
    if (*writer) (void)!::write(writer->get(), &one, sizeof(one));
  });
  return fd;
}

int make_syncobj_fd(std::shared_ptr<Syncobj> syncobj) {
  const int fd = memfd_create("rvgl-syncobj", MFD_CLOEXEC);
  if (fd < 0) return -errno;
  Emulator::get().fds().set(fd, std::make_shared<SyncobjFile>(std::move(syncobj)));
  return fd;
}

int drm_ioctl_syncobj_create(DeviceFile &f, void *data) {
  auto *a = static_cast<drm_syncobj_create *>(data);
  if (a->flags & ~DRM_SYNCOBJ_CREATE_SIGNALED) return -EINVAL;
  auto s = std::make_shared<Syncobj>();
  if (a->flags & DRM_SYNCOBJ_CREATE_SIGNALED) {
    std::lock_guard lk(FenceDomain::mutex());
    s->replace_locked(Fence::signaled());
  }
  std::lock_guard lk(Emulator::get().mutex());
  a->handle = f.syncobjs.insert(std::move(s));
  return 0;
}

int drm_ioctl_syncobj_destroy(DeviceFile &f, void *data) {
  auto *a = static_cast<drm_syncobj_destroy *>(data);
  if (a->pad) return -EINVAL;
  std::shared_ptr<Syncobj> gone;
  std::lock_guard lk(Emulator::get().mutex());
  return f.syncobjs.erase(a->handle, &gone) ? 0 : -EINVAL;
}

int drm_ioctl_syncobj_handle_to_fd(DeviceFile &f, void *data) {
  auto *a = static_cast<drm_syncobj_handle *>(data);
  if (a->pad) return -EINVAL;
  if (a->flags != 0 && a->flags != DRM_SYNCOBJ_HANDLE_TO_FD_FLAGS_EXPORT_SYNC_FILE) return -EINVAL;
  std::lock_guard lk(Emulator::get().mutex());
  auto s = f.syncobjs.get(a->handle);
  if (!s) return -EINVAL;
  int fd;
  if (a->flags & DRM_SYNCOBJ_HANDLE_TO_FD_FLAGS_EXPORT_SYNC_FILE) {
    std::vector<std::shared_ptr<Fence>> fences;
    {
      std::lock_guard flk(FenceDomain::mutex());
      if (!s->available_locked(0)) return -EINVAL;
      fences = s->fences_for_locked(0);
    }
    fd = make_sync_file_fd(Fence::all_of(fences));
  } else {
    fd = make_syncobj_fd(s);
  }
  if (fd < 0) return fd;
  a->fd = fd;
  return 0;
}

int drm_ioctl_syncobj_fd_to_handle(DeviceFile &f, void *data) {
  auto *a = static_cast<drm_syncobj_handle *>(data);
  if (a->pad) return -EINVAL;
  if (a->flags != 0 && a->flags != DRM_SYNCOBJ_FD_TO_HANDLE_FLAGS_IMPORT_SYNC_FILE) return -EINVAL;
  Emulator &emu = Emulator::get();
  std::lock_guard lk(emu.mutex());
  auto of = emu.fds().get(a->fd);
  if (a->flags & DRM_SYNCOBJ_FD_TO_HANDLE_FLAGS_IMPORT_SYNC_FILE) {
    if (!of || of->kind() != OpenFile::Kind::SyncFile) return -EINVAL;
    auto s = f.syncobjs.get(a->handle);
    if (!s) return -ENOENT;
    std::lock_guard flk(FenceDomain::mutex());
    s->replace_locked(static_cast<SyncFileFile &>(*of).fence);
    return 0;
  }
  if (!of || of->kind() != OpenFile::Kind::Syncobj) return -EINVAL;
  a->handle = f.syncobjs.insert(static_cast<SyncobjFile &>(*of).syncobj);
  return 0;
}

int drm_ioctl_syncobj_wait(DeviceFile &f, void *data) {
  auto *a = static_cast<drm_syncobj_wait *>(data);
  return wait_common(f, a->handles, nullptr, a->count_handles, a->flags, a->timeout_nsec,
                     &a->first_signaled);
}

int drm_ioctl_syncobj_timeline_wait(DeviceFile &f, void *data) {
  auto *a = static_cast<drm_syncobj_timeline_wait *>(data);
  const uint64_t points = a->points;
  return wait_common(f, a->handles, &points, a->count_handles, a->flags, a->timeout_nsec,
                     &a->first_signaled);
}

namespace {

int for_each_syncobj(DeviceFile &f, const drm_syncobj_array &a,
                     void (*op)(const std::shared_ptr<Syncobj> &)) {
  if (a.pad) return -EINVAL;
  std::vector<uint32_t> handles;
  if (int r = copy_handles(a.handles, a.count_handles, handles)) return r;
  std::vector<std::shared_ptr<Syncobj>> objs;
  if (int r = lookup(f, handles, objs)) return r;
  std::lock_guard flk(FenceDomain::mutex());
  for (auto &s : objs)
    op(s);
  return 0;
}

}  // namespace

int drm_ioctl_syncobj_reset(DeviceFile &f, void *data) {
  return for_each_syncobj(f, *static_cast<drm_syncobj_array *>(data),
                          [](const std::shared_ptr<Syncobj> &s) { s->replace_locked(nullptr); });
}

int drm_ioctl_syncobj_signal(DeviceFile &f, void *data) {
  return for_each_syncobj(
      f, *static_cast<drm_syncobj_array *>(data),
      [](const std::shared_ptr<Syncobj> &s) { s->replace_locked(Fence::signaled()); });
}

int drm_ioctl_syncobj_timeline_signal(DeviceFile &f, void *data) {
  auto *a = static_cast<drm_syncobj_timeline_array *>(data);
  if (a->flags) return -EINVAL;
  std::vector<uint32_t> handles;
  if (int r = copy_handles(a->handles, a->count_handles, handles)) return r;
  std::vector<uint64_t> points;
  if (copy_points(a->points, a->count_handles, points)) return -EFAULT;
  std::vector<std::shared_ptr<Syncobj>> objs;
  if (int r = lookup(f, handles, objs)) return r;
  std::lock_guard flk(FenceDomain::mutex());
  for (size_t i = 0; i < objs.size(); ++i) {
    if (points[i])
      objs[i]->add_point_locked(points[i], Fence::signaled());
    else
      objs[i]->replace_locked(Fence::signaled());
  }
  return 0;
}

int drm_ioctl_syncobj_query(DeviceFile &f, void *data) {
  auto *a = static_cast<drm_syncobj_timeline_array *>(data);
  if (a->flags & ~DRM_SYNCOBJ_QUERY_FLAGS_LAST_SUBMITTED) return -EINVAL;
  std::vector<uint32_t> handles;
  if (int r = copy_handles(a->handles, a->count_handles, handles)) return r;
  std::vector<std::shared_ptr<Syncobj>> objs;
  if (int r = lookup(f, handles, objs)) return r;
  std::vector<uint64_t> points(objs.size());
  {
    std::lock_guard flk(FenceDomain::mutex());
    for (size_t i = 0; i < objs.size(); ++i)
      points[i] = objs[i]->query_locked(a->flags & DRM_SYNCOBJ_QUERY_FLAGS_LAST_SUBMITTED);
  }
  return copy_to_user(a->points, points.data(), points.size() * sizeof(uint64_t));
}

int drm_ioctl_syncobj_transfer(DeviceFile &f, void *data) {
  auto *a = static_cast<drm_syncobj_transfer *>(data);
  if (a->pad) return -EINVAL;
  if (a->flags & ~DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT) return -EINVAL;
  std::shared_ptr<Syncobj> src = f.syncobjs.get(a->src_handle);
  std::shared_ptr<Syncobj> dst = f.syncobjs.get(a->dst_handle);
  if (!src || !dst) return -ENOENT;
  std::vector<std::shared_ptr<Fence>> fences;
  {
    std::unique_lock flk(FenceDomain::mutex());
    if (!src->available_locked(a->src_point)) {
      if (!(a->flags & DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT)) return -EINVAL;
      if (!FenceDomain::wait_until(
              flk, SteadyClock::now() + kSubmitWait,
              [&] { return src->available_locked(a->src_point); },
              [&](Waiter &w) { Syncobj::subscribe_locked(w, src, a->src_point); }))
        return -ETIME;
    }
    fences = src->fences_for_locked(a->src_point);
  }
  auto fence = Fence::all_of(fences);
  std::lock_guard flk(FenceDomain::mutex());
  if (a->dst_point)
    dst->add_point_locked(a->dst_point, std::move(fence));
  else
    dst->replace_locked(std::move(fence));
  return 0;
}

}  // namespace rvgl::emu

namespace rvgl::emu {

namespace {

// eventfd_ctx_fdget(): -EBADF for an fd that is not open, -EINVAL for a file that is not an eventfd
// (a sync_file here is an eventfd underneath, but the kernel's is not: it is refused too).
int check_eventfd(int fd) {
  if (fd < 0 || real::fcntl(fd, F_GETFD, nullptr) < 0) return -EBADF;
  if (Emulator::get().fds().get(fd)) return -EINVAL;
  char path[64], target[64];
  std::snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
  const ssize_t n = real::readlink(path, target, sizeof(target) - 1);
  if (n < 0) return -EBADF;
  target[n] = '\0';
  return std::strcmp(target, "anon_inode:[eventfd]") == 0 ? 0 : -EINVAL;
}

// The kernel's registration takes a reference on the eventfd context (eventfd_ctx_fdget(): fget
// and an f_op check, no syscall, no descriptor), and the entry drops it when it fires. The
// emulator verifies a number once (an fcntl and a /proc readlink) and keeps its hold in the fd
// table, which forgets it when that number is closed or replaced (core/fd_table.h): a re-arm
// makes no system call, as the kernel's makes none beyond the ioctl itself, and no descriptor is
// spent unless the number goes while a registration still needs the file (sync/eventfd_ref.h).
std::shared_ptr<EventfdRef> eventfd_handle(int fd, int *err) {
  if (fd < 0) {
    *err = -EBADF;
    return nullptr;
  }
  FdTable &fds = Emulator::get().fds();
  if (auto known = fds.known_eventfd(fd)) return known;
  if ((*err = check_eventfd(fd))) return nullptr;
  auto ref = std::make_shared<EventfdRef>(fd);
  // A number the table cannot watch: a descriptor of our own from the start.
  if (!fds.remember_eventfd(fd, ref) && !ref->detach(true)) {
    *err = -errno;
    return nullptr;
  }
  return ref;
}

}  // namespace

// drm_syncobj_eventfd_ioctl() and drm_syncobj_register_eventfd() (drivers/gpu/drm/drm_syncobj.c).
int drm_ioctl_syncobj_eventfd(DeviceFile &f, void *data) {
  auto *a = static_cast<SyncobjEventfdArgs *>(data);
  // amdgpu has DRIVER_SYNCOBJ_TIMELINE, so the -EOPNOTSUPP branch never applies.
  if (a->flags & ~DRM_SYNCOBJ_WAIT_FLAGS_WAIT_AVAILABLE) return -EINVAL;
  if (a->pad) return -EINVAL;
  // No state lock (drm_syncobj_find() takes only the file's table lock): a registration never
  // waits for another file's CS.
  std::shared_ptr<Syncobj> s = f.syncobjs.get(a->handle);
  if (!s) return -ENOENT;
  // The kernel holds the eventfd context, not the fd: closing the caller's fd keeps it alive.
  int err = 0;
  auto own = eventfd_handle(a->fd, &err);
  if (!own) return err;
  std::lock_guard flk(FenceDomain::mutex());
  s->add_eventfd_locked(std::move(own), a->point, a->flags & DRM_SYNCOBJ_WAIT_FLAGS_WAIT_AVAILABLE);
  counters().syncobj_eventfds_registered.fetch_add(1, std::memory_order_relaxed);
  return 0;
}

}  // namespace rvgl::emu
