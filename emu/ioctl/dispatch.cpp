#include "ioctl/dispatch.h"

#include <drm.h>
#include <linux/dma-buf.h>
#include <linux/udmabuf.h>
#include <sys/ioctl.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cerrno>
#include <cstring>
#include <vector>

#include "core/counters.h"
#include "core/device_file.h"
#include "core/emulator.h"
#include "core/runtime_knobs.h"
#include "fs/sysfs_attributes.h"
#include "ioctl/drm_ioctl_table.h"
#include "ioctl/drm_uapi_ext.h"
#include "ioctl/udmabuf.h"
#include "util/user_memory.h"

namespace rvgl::emu {

namespace {

int injected(std::string_view name) {
  const int err = Emulator::get().faults().on_call(name);
  if (err) counters().injected_failures.fetch_add(1, std::memory_order_relaxed);
  return err;
}

// RVGL_EMU_TRACE: one line per ioctl on stderr (1: only failures), for finding which call of a
// program fails without a debugger.
void trace(const char *name, int r) {
  const uint64_t level = knobs().trace.load(std::memory_order_relaxed);
  if (!level || (level == 1 && r >= 0)) return;
  char line[128];
  const int n = std::snprintf(line, sizeof(line), "rvgl-emu[%d]: %s -> %d\n", getpid(), name, r);
  if (n > 0) (void)!::write(2, line, static_cast<size_t>(std::min(n, 127)));
}

int dispatch_drm(DeviceFile &file, unsigned long request, void *arg) {
  if (_IOC_TYPE(request) != DRM_IOCTL_BASE) return -ENOTTY;
  const DrmIoctl *entry = find_drm_ioctl(_IOC_NR(request));
  // drm_ioctl(): a core number past the kernel's table (a pre-6.6 kernel has no SYNCOBJ_EVENTFD)
  // leaves retcode at its initial -EINVAL.
  if (!entry || (entry->nr == kDrmSyncobjEventfdNr &&
                 knobs().no_syncobj_eventfd.load(std::memory_order_relaxed)))
    return -EINVAL;
  if (int err = injected(entry->name)) return -err;
  // drm_ioctl: an unplugged device (drm_dev_is_unplugged) answers nothing but ENODEV.
  if (device_file_unplugged(file)) return -ENODEV;
  // drm_ioctl_permit(): a render node only runs ioctls marked DRM_RENDER_ALLOW.
  if (!file.primary && !(entry->flags & kRenderAllow)) return -EACCES;
  if (file.primary && (entry->flags & kRenderOnly)) return -EACCES;

  const uint32_t kdir = _IOC_DIR(entry->cmd), udir = _IOC_DIR(request);
  const uint32_t usize = _IOC_SIZE(request);
  const uint32_t in_size = (udir & kdir & _IOC_WRITE) ? usize : 0;
  const uint32_t out_size = (udir & kdir & _IOC_READ) ? usize : 0;
  const uint32_t ksize =
      std::max({in_size, out_size, static_cast<uint32_t>(_IOC_SIZE(entry->cmd))});

  alignas(16) uint8_t stack_buf[512];
  std::vector<uint8_t> heap_buf;
  uint8_t *kdata = stack_buf;
  if (ksize > sizeof(stack_buf)) {
    heap_buf.resize(ksize);
    kdata = heap_buf.data();
  }
  std::memset(kdata, 0, ksize);
  if (in_size && copy_from_user(kdata, reinterpret_cast<uint64_t>(arg), in_size) != 0)
    return -EFAULT;
  int r = entry->handler(file, kdata);
  if (out_size && copy_to_user(reinterpret_cast<uint64_t>(arg), kdata, out_size) != 0) r = -EFAULT;
  trace(entry->name, r);
  return r;
}

// dma-buf file ioctls (drivers/dma-buf/dma-buf.c): CPU access bracketing is a no-op on coherent
// memory but its flags are still checked.
int dispatch_dma_buf(unsigned long request, void *arg) {
  if (request == DMA_BUF_IOCTL_SYNC) {
    dma_buf_sync sync;
    if (copy_from_user(&sync, reinterpret_cast<uint64_t>(arg), sizeof(sync))) return -EFAULT;
    if (sync.flags & ~(DMA_BUF_SYNC_RW | DMA_BUF_SYNC_END)) return -EINVAL;
    if (!(sync.flags & DMA_BUF_SYNC_RW)) return -EINVAL;
    return 0;
  }
#ifdef DMA_BUF_SET_NAME
  if (request == DMA_BUF_SET_NAME || request == DMA_BUF_SET_NAME_A || request == DMA_BUF_SET_NAME_B)
    return 0;
#endif
  return -ENOTTY;
}

}  // namespace

namespace {
thread_local uint64_t t_ioctls = 0;  // rvgl_emu_thread_ioctls(): this thread's share of `ioctls`
}  // namespace

uint64_t thread_ioctls() {
  return t_ioctls;
}

int dispatch_ioctl(const std::shared_ptr<OpenFile> &file, unsigned long request, void *arg) {
  counters().ioctls.fetch_add(1, std::memory_order_relaxed);
  ++t_ioctls;
  apply_sysfs_writes();  // a `remove` written just before takes effect first
  switch (file->kind()) {
    case OpenFile::Kind::Device:
      return dispatch_drm(static_cast<DeviceFile &>(*file), request, arg);
    case OpenFile::Kind::UdmabufDevice:
      if (request == UDMABUF_CREATE) {
        if (int err = injected("UDMABUF_CREATE")) return -err;
        return udmabuf_create(arg);
      }
      if (request == UDMABUF_CREATE_LIST) {
        if (int err = injected("UDMABUF_CREATE_LIST")) return -err;
        return udmabuf_create_list(arg);
      }
      return -ENOTTY;
    case OpenFile::Kind::DmaBuf:
    case OpenFile::Kind::Udmabuf:
      return dispatch_dma_buf(request, arg);
    case OpenFile::Kind::Syncobj:
    case OpenFile::Kind::SyncFile:
    case OpenFile::Kind::TreeDir:
      return -ENOTTY;
  }
  return -ENOTTY;
}

}  // namespace rvgl::emu
