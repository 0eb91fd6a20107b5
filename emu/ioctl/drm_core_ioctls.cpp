// DRM core ioctls of drivers/gpu/drm/drm_ioctl.c and drm_gem.c as amdgpu's device answers them.
#include <drm.h>
#include <linux/capability.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "core/device.h"
#include "core/emulator.h"
#include "fs/fake_tree.h"
#include "ioctl/handlers.h"
#include "util/user_memory.h"

namespace rvgl::emu {

namespace {

// drm_copy_field(): copies min(buffer, length) bytes and reports the full length.
int copy_field(uint64_t user_buf, __kernel_size_t *user_len, const char *value) {
  const size_t len = std::strlen(value);
  const size_t n = std::min<size_t>(*user_len, len);
  *user_len = len;
  if (n && copy_to_user(user_buf, value, n) != 0) return -EFAULT;
  return 0;
}

}  // namespace

bool caller_has_sys_nice() {
  __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2]{};
  if (syscall(SYS_capget, &hdr, data) != 0) return false;
  return (data[CAP_SYS_NICE / 32].effective >> (CAP_SYS_NICE % 32)) & 1;
}

int drm_ioctl_version(DeviceFile &f, void *data) {
  auto *v = static_cast<drm_version *>(data);
  // amdgpu_drv.c: DRIVER_NAME "amdgpu", DRIVER_DESC "AMD GPU", DRIVER_DATE "20150101",
  // KMS_DRIVER_MAJOR 3.
  v->version_major = 3;
  v->version_minor = static_cast<int>(f.device.drm_minor_version());
  v->version_patchlevel = 0;
  if (int r = copy_field(reinterpret_cast<uint64_t>(v->name), &v->name_len, "amdgpu")) return r;
  if (int r = copy_field(reinterpret_cast<uint64_t>(v->date), &v->date_len, "20150101")) return r;
  return copy_field(reinterpret_cast<uint64_t>(v->desc), &v->desc_len, "AMD GPU");
}

int drm_ioctl_get_unique(DeviceFile &f, void *data) {
  auto *u = static_cast<drm_unique *>(data);
  const std::string bus = "pci:" + FakeTree::pci_slot(f.device.index());
  return copy_field(reinterpret_cast<uint64_t>(u->unique), &u->unique_len, bus.c_str());
}

int drm_ioctl_get_magic(DeviceFile &f, void *data) {
  static_cast<drm_auth *>(data)->magic = static_cast<unsigned>(f.id);
  return 0;
}

int drm_ioctl_get_client(DeviceFile &f, void *data) {
  auto *c = static_cast<drm_client *>(data);
  if (c->idx != 0) return -EINVAL;  // the emulator knows only the caller
  c->auth = 1;
  c->pid = getpid();
  c->uid = getuid();
  c->magic = static_cast<unsigned long>(f.id);
  c->iocs = 0;
  return 0;
}

int drm_ioctl_get_cap(DeviceFile &, void *data) {
  auto *c = static_cast<drm_get_cap *>(data);
  // drm_getcap(): the values amdgpu answers.
  switch (c->capability) {
    case DRM_CAP_DUMB_BUFFER:
      c->value = 1;
      return 0;
    case DRM_CAP_VBLANK_HIGH_CRTC:
      c->value = 1;
      return 0;
    case DRM_CAP_DUMB_PREFERRED_DEPTH:
      c->value = 24;
      return 0;
    case DRM_CAP_DUMB_PREFER_SHADOW:
      c->value = 1;
      return 0;
    case DRM_CAP_PRIME:
      c->value = DRM_PRIME_CAP_IMPORT | DRM_PRIME_CAP_EXPORT;
      return 0;
    case DRM_CAP_TIMESTAMP_MONOTONIC:
      c->value = 1;
      return 0;
    case DRM_CAP_ASYNC_PAGE_FLIP:
      c->value = 1;
      return 0;
    case DRM_CAP_CURSOR_WIDTH:
    case DRM_CAP_CURSOR_HEIGHT:
      c->value = 128;
      return 0;
    case DRM_CAP_ADDFB2_MODIFIERS:
      c->value = 1;
      return 0;
    case DRM_CAP_PAGE_FLIP_TARGET:
      c->value = 1;
      return 0;
    case DRM_CAP_CRTC_IN_VBLANK_EVENT:
      c->value = 1;
      return 0;
    case DRM_CAP_SYNCOBJ:
      c->value = 1;
      return 0;
    case DRM_CAP_SYNCOBJ_TIMELINE:
      c->value = 1;
      return 0;
    default:
      return -EINVAL;
  }
}

int drm_ioctl_set_client_cap(DeviceFile &, void *data) {
  auto *c = static_cast<drm_set_client_cap *>(data);
  // STEREO_3D 1 .. CURSOR_PLANE_HOTSPOT 6 take 0 or 1.
  if (c->capability < 1 || c->capability > 6 || c->value > 1) return -EINVAL;
  return 0;
}

int drm_ioctl_gem_close(DeviceFile &f, void *data) {
  auto *c = static_cast<drm_gem_close *>(data);
  std::lock_guard lk(Emulator::get().mutex());
  return f.close_handle(c->handle) ? 0 : -EINVAL;
}

}  // namespace rvgl::emu
