#include "amdgpu/amdgpu_device.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xf86drm.h>

#include <cerrno>
#include <cstdlib>
#include <climits>
#include <cstdio>
#include <cstring>
#include <new>
#include <memory>
#include <mutex>

#include "util/same_open_file.h"

namespace rvgl {

AmdgpuDevice::~AmdgpuDevice() {
  fd_.reset();  // first: the kernel lets go of what it was still writing into
  kept_.clear();
}

bool AmdgpuDevice::reserve_kept(size_t n) {
  std::lock_guard lk(kept_mu_);
  try {
    kept_.reserve(kept_.size() + kept_reserved_ + n);
  } catch (const std::exception &) {  // bad_alloc, or length_error past any real count
    return false;
  }
  kept_reserved_ += n;
  return true;
}

void AmdgpuDevice::unreserve_kept(size_t n) {
  std::lock_guard lk(kept_mu_);
  kept_reserved_ -= n;
}

void AmdgpuDevice::keep_reserved(std::shared_ptr<const void> what) {
  std::lock_guard lk(kept_mu_);
  --kept_reserved_;
  kept_.push_back(std::move(what));  // within the capacity reserve_kept() made
}

size_t AmdgpuDevice::kept_until_closed() const {
  std::lock_guard lk(kept_mu_);
  return kept_.size();
}

size_t AmdgpuDevice::kept_places_reserved() const {
  std::lock_guard lk(kept_mu_);
  return kept_reserved_;
}

std::shared_ptr<AmdgpuDevice> AmdgpuDevice::open(const std::string &path, int *err) {
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CLOEXEC));
  if (!fd) {
    *err = -errno;
    return nullptr;
  }
  return adopt(std::move(fd), err);
}

std::shared_ptr<AmdgpuDevice> AmdgpuDevice::adopt(UniqueFd fd, int *err) {
  std::shared_ptr<AmdgpuDevice> dev(new AmdgpuDevice(std::move(fd)));
  *err = dev->check_driver();
  if (*err) return nullptr;
  return dev;
}

std::shared_ptr<AmdgpuDevice> AmdgpuDevice::adopt_private(UniqueFd fd, int *err) {
  // The file is the context's own only if nothing else in this process names it: a dup the VMM
  // kept for its own rendering, the real library's, or another context's would share the GPU VM
  // and handle namespace (DESIGN.md D2). Any doubt counts as shared.
  if (open_file_named_elsewhere(fd.get()) == 0) return adopt(std::move(fd), err);
  // A file of its own on the same node: the VMM's choice of device is kept, not its open file.
  char link[64], path[PATH_MAX];
  std::snprintf(link, sizeof(link), "/proc/self/fd/%d", fd.get());
  const ssize_t n = readlink(link, path, sizeof(path) - 1);
  if (n <= 0) {
    *err = -EBUSY;
    return nullptr;
  }
  path[n] = 0;
  auto dev = open(path, err);
  // The name may lead elsewhere in this process's mount namespace (or the node was replaced):
  // only the device the VMM chose will do.
  struct stat want = {};
  struct stat got = {};
  if (dev && (fstat(fd.get(), &want) != 0 || fstat(dev->fd(), &got) != 0 ||
              !S_ISCHR(want.st_mode) || !S_ISCHR(got.st_mode) || want.st_rdev != got.st_rdev)) {
    *err = -EBUSY;
    return nullptr;
  }
  return dev;
}

std::shared_ptr<AmdgpuDevice> AmdgpuDevice::reopen(int *err) const {
  // By name, not through /proc/self/fd: a new open of the node is a new DRM file. A VMM's fd may
  // be a primary node; its render node is preferred, the node itself otherwise.
  // libdrm's strings are malloc'd: owned here, so a failed copy of one does not leak it.
  std::unique_ptr<char, decltype(&free)> name(drmGetRenderDeviceNameFromFd(fd_.get()), &free);
  if (!name) name.reset(drmGetDeviceNameFromFd2(fd_.get()));
  if (!name) {
    *err = -ENODEV;
    return nullptr;
  }
  return open(name.get(), err);
}

int AmdgpuDevice::check_driver() {
  errno = 0;
  drmVersionPtr v = drmGetVersion(fd_.get());
  // A failed VERSION is the kernel's errno (drmGetVersion frees and returns with it), passed on
  // as for any query of the create; only a file that has no such ioctl is not a DRM node.
  if (!v) return errno == 0 || errno == ENOTTY ? -ENODEV : -errno;
  // amdgpu's KMS interface is version 3 (libdrm amdgpu_device_initialize checks the same).
  const bool ok = v->name && std::strcmp(v->name, "amdgpu") == 0 && v->version_major == 3;
  drm_minor_ = static_cast<uint32_t>(v->version_minor);
  drmFreeVersion(v);
  return ok ? 0 : -ENODEV;
}

int AmdgpuDevice::ioctl(unsigned long request, void *arg) const {
  return drmIoctl(fd_.get(), request, arg) == 0 ? 0 : -errno;
}

}  // namespace rvgl
