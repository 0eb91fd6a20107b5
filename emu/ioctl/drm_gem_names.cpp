// GEM global names (drm_gem.c drm_gem_flink_ioctl / drm_gem_open_ioctl) and the authentication
// they require on a primary node (drm_ioctl.c drm_ioctl_permit: DRM_AUTH; drm_auth.c).
//
// Who is authenticated, as the kernel decides it: the node's master (the kernel makes the first
// opener master; here the oldest primary file of the device still open), any opener with
// CAP_SYS_ADMIN (drm_file_alloc), and a file whose magic the master passed to AUTH_MAGIC.
#include <drm.h>
#include <linux/capability.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <map>
#include <memory>
#include <set>

#include "core/device.h"
#include "core/device_file.h"
#include "core/emulator.h"
#include "ioctl/handlers.h"

namespace rvgl::emu {

namespace {

struct DeviceNames {
  std::map<uint32_t, std::weak_ptr<BufferObject>> by_name;  // idr of live names
  std::map<const BufferObject *, uint32_t> by_object;
};

// Guarded by the emulator state lock.
std::map<int, DeviceNames> g_names;        // device index -> its name table
std::set<uint64_t> g_authenticated_files;  // file ids AUTH_MAGIC authenticated

bool caller_has_sys_admin() {
  __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2]{};
  if (syscall(SYS_capget, &hdr, data) != 0) return false;
  return (data[CAP_SYS_ADMIN / 32].effective >> (CAP_SYS_ADMIN % 32)) & 1;
}

// The master of f's node: the oldest primary file of the same device still open.
uint64_t master_file_id(const DeviceFile &f) {
  uint64_t master = 0;
  Emulator::get().fds().for_each([&](int, const std::shared_ptr<OpenFile> &of) {
    if (!of || of->kind() != OpenFile::Kind::Device) return;
    const auto &df = static_cast<const DeviceFile &>(*of);
    if (!df.primary || &df.device != &f.device) return;
    if (master == 0 || df.id < master) master = df.id;
  });
  return master;
}

bool authenticated(const DeviceFile &f) {
  return master_file_id(f) == f.id || g_authenticated_files.count(f.id) || caller_has_sys_admin();
}

// Drops names whose object is gone (the kernel removes a name with the object's last handle).
void sweep(DeviceNames &n) {
  for (auto it = n.by_name.begin(); it != n.by_name.end();) {
    if (it->second.expired()) {
      std::erase_if(n.by_object, [&](const auto &e) { return e.second == it->first; });
      it = n.by_name.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace

bool drm_file_is_master(const DeviceFile &f) {
  return f.primary && master_file_id(f) == f.id;
}

int drm_ioctl_auth_magic(DeviceFile &f, void *data) {
  const uint32_t magic = static_cast<drm_auth *>(data)->magic;
  std::lock_guard lk(Emulator::get().mutex());
  // DRM_MASTER: only the master authenticates (drmIsMaster tells master from not by EACCES
  // versus the EINVAL magic 0 gets).
  if (!drm_file_is_master(f)) return -EACCES;
  if (magic == 0) return -EINVAL;
  // drm_authmagic(): the magic must belong to an open file of the same master.
  bool found = false;
  Emulator::get().fds().for_each([&](int, const std::shared_ptr<OpenFile> &of) {
    if (!of || of->kind() != OpenFile::Kind::Device) return;
    const auto &df = static_cast<const DeviceFile &>(*of);
    if (df.primary && &df.device == &f.device && static_cast<uint32_t>(df.id) == magic)
      found = true;
  });
  if (!found) return -EINVAL;
  g_authenticated_files.insert(magic);
  return 0;
}

int drm_ioctl_gem_flink(DeviceFile &f, void *data) {
  auto *a = static_cast<drm_gem_flink *>(data);
  std::lock_guard lk(Emulator::get().mutex());
  if (!authenticated(f)) return -EACCES;  // DRM_AUTH
  auto bo = f.bo(a->handle);
  if (!bo) return -ENOENT;
  DeviceNames &n = g_names[f.device.index()];
  sweep(n);
  auto it = n.by_object.find(bo.get());
  if (it != n.by_object.end()) {
    a->name = it->second;  // an object keeps its first name
    return 0;
  }
  // idr_alloc(&dev->object_name_idr, obj, 1, 0): the lowest free name from 1.
  uint32_t name = 1;
  for (const auto &[used, _] : n.by_name) {
    if (used != name) break;
    ++name;
  }
  n.by_name.emplace(name, bo);
  n.by_object.emplace(bo.get(), name);
  a->name = name;
  return 0;
}

int drm_ioctl_gem_open(DeviceFile &f, void *data) {
  auto *a = static_cast<drm_gem_open *>(data);
  std::lock_guard lk(Emulator::get().mutex());
  if (!authenticated(f)) return -EACCES;  // DRM_AUTH
  DeviceNames &n = g_names[f.device.index()];
  sweep(n);
  auto it = n.by_name.find(a->name);
  std::shared_ptr<BufferObject> bo = it == n.by_name.end() ? nullptr : it->second.lock();
  if (!bo) return -ENOENT;
  a->size = bo->size();
  a->handle = f.handle_for(std::move(bo));
  return 0;
}

}  // namespace rvgl::emu
