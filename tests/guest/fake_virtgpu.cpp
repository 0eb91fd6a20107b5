#include "fake_virtgpu.h"

#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <deque>
#include <thread>
#include <utility>

namespace rvgl::guest::test {

namespace {

constexpr uint32_t driver_nr(uint32_t n) {
  return DRM_COMMAND_BASE + n;
}

const uint32_t kNrVersion = _IOC_NR(DRM_IOCTL_VERSION);
const uint32_t kNrGemClose = _IOC_NR(DRM_IOCTL_GEM_CLOSE);

UniqueFd make_memfd(uint64_t size) {
  UniqueFd fd(memfd_create("fake-virtgpu-blob", MFD_CLOEXEC));
  if (fd && ftruncate(fd.get(), static_cast<off_t>(size)) != 0) fd.reset();
  return fd;
}

long page_size() {
  return sysconf(_SC_PAGESIZE);
}

}  // namespace

std::map<uint64_t, uint64_t> full_virtgpu_params(uint64_t capset_ids) {
  return {
      {VIRTGPU_PARAM_3D_FEATURES, 1},
      {VIRTGPU_PARAM_CAPSET_QUERY_FIX, 1},
      {VIRTGPU_PARAM_RESOURCE_BLOB, 1},
      {VIRTGPU_PARAM_HOST_VISIBLE, 1},
      {VIRTGPU_PARAM_CROSS_DEVICE, 0},
      {VIRTGPU_PARAM_CONTEXT_INIT, 1},
      {VIRTGPU_PARAM_SUPPORTED_CAPSET_IDs, capset_ids},
  };
}

struct FakeVirtgpu::Fence {
  UniqueFd efd;
  bool signalled = false;
  int event_file = -1;  // the file whose DRM event queue gets VIRTGPU_EVENT_FENCE_SIGNALED
};

struct FakeVirtgpu::Bo {
  uint32_t handle = 0;
  uint32_t res_id = 0;
  uint32_t blob_mem = 0;
  uint32_t blob_flags = 0;
  uint64_t size = 0;
  UniqueFd memory;             // what a mapping maps (host memory or guest shmem)
  uint8_t *userptr = nullptr;  // userptr blobs: the pinned guest pages
  uint64_t map_offset = 0;     // 0 until DRM_IOCTL_VIRTGPU_MAP
  bool handle_open = true;
  int maps = 0;
  std::vector<std::shared_ptr<Fence>> fences;  // implicit fencing (EXECBUFFER bo_handles)
};

struct FakeVirtgpu::File {
  UniqueFd fd;
  FakeNode node;
  bool context_created = false;
  bool rings_set = false;
  uint32_t capset = 0;
  uint32_t num_rings = 0;
  uint64_t ring_mask = 0;
  uint32_t next_handle = 1;
  std::map<uint32_t, std::shared_ptr<Bo>> handles;
  std::deque<drm_event> events;
};

FakeVirtgpu::FakeVirtgpu() = default;
FakeVirtgpu::~FakeVirtgpu() = default;

FakeVirtgpu::File *FakeVirtgpu::file(int fd) {
  auto it = files_.find(fd);
  return it == files_.end() ? nullptr : it->second.get();
}

bool FakeVirtgpu::param(const File &f, uint64_t id) const {
  auto it = f.node.params.find(id);
  return it != f.node.params.end() && it->second != 0;
}

// ---------------------------------------------------------------------------------------------
// Files and directories

int FakeVirtgpu::list_dir(const char *path, std::vector<std::string> &names) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!has_dri_directory || std::string(path) != "/dev/dri") return -ENOENT;
  names = other_dri_entries;
  for (const auto &n : nodes)
    names.push_back(n.name);
  return 0;
}

int FakeVirtgpu::open(const char *path, int flags) {
  std::lock_guard<std::mutex> lock(mu_);
  opened_.push_back(path);
  last_open_flags_ = flags;
  const std::string p(path);
  const std::string dir = "/dev/dri/";
  if (p.compare(0, dir.size(), dir) != 0) return -ENOENT;
  for (const auto &n : nodes) {
    if (p.substr(dir.size()) != n.name) continue;
    auto f = std::make_unique<File>();
    f->fd.reset(eventfd(0, EFD_CLOEXEC));
    if (!f->fd) return -errno;
    f->node = n;
    const int fd = f->fd.get();
    files_[fd] = std::move(f);
    return fd;
  }
  return -ENOENT;
}

int FakeVirtgpu::close(int fd) {
  std::lock_guard<std::mutex> lock(mu_);
  File *f = file(fd);
  if (!f) return ::close(fd) < 0 ? -errno : 0;
  // Closing the file drops its handles; a mapping keeps its object until munmap.
  for (auto &[handle, bo] : f->handles) {
    bo->handle_open = false;
    if (bo->maps == 0) drop_bo(bo->res_id);
  }
  files_.erase(fd);
  return 0;
}

// ---------------------------------------------------------------------------------------------
// ioctl: drm_ioctl()'s argument handling, then the driver's handler

int FakeVirtgpu::ioctl(int fd, unsigned long request, void *arg) {
  std::unique_lock<std::mutex> lock(mu_);
  File *f = file(fd);
  if (!f) return -ENOTTY;
  IoctlCall call;
  call.request = request;
  call.nr = _IOC_NR(request);
  const size_t usize = _IOC_SIZE(request);
  if (usize && !arg) return -EFAULT;
  call.in.assign(static_cast<uint8_t *>(arg), static_cast<uint8_t *>(arg) + usize);
  auto finish = [&](int r) {
    call.result = r;
    calls_.push_back(call);
    return r;
  };
  if (_IOC_TYPE(request) != DRM_IOCTL_BASE) return finish(-ENOTTY);

  const unsigned n = ++nr_counts_[call.nr];
  for (const auto &fault : faults)
    if (fault.nr == call.nr && fault.nth == n) return finish(fault.error);

  const size_t ksize = kernel_arg_size(call.nr);  // the kernel's idea of the argument
  if (!ksize) return finish(-EINVAL);

  // Zero-extended to what the kernel knows; bytes beyond it are ignored.
  std::vector<uint8_t> k(std::max(usize, ksize), 0);
  std::copy(call.in.begin(), call.in.end(), k.begin());
  int r = dispatch(*f, call.nr, k, call);
  if (r == 1) {  // a blocking WAIT on a busy object: wait without holding the device
    const auto handle = reinterpret_cast<drm_virtgpu_3d_wait *>(k.data())->handle;
    const auto until = std::chrono::steady_clock::now() + wait_bound;
    r = -EBUSY;
    while (std::chrono::steady_clock::now() < until) {
      lock.unlock();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      lock.lock();
      f = file(fd);
      if (!f || !f->handles.count(handle)) {
        r = -ENOENT;
        break;
      }
      const auto &fences = f->handles[handle]->fences;
      if (std::none_of(fences.begin(), fences.end(), [](auto &x) { return !x->signalled; })) {
        r = 0;
        break;
      }
    }
  }
  if (_IOC_DIR(request) & _IOC_READ)
    std::copy(k.begin(), k.begin() + usize, static_cast<uint8_t *>(arg));
  return finish(r);
}

size_t FakeVirtgpu::kernel_arg_size(uint32_t nr) const {
  if (nr == kNrVersion) return sizeof(drm_version);
  if (nr == kNrGemClose) return sizeof(drm_gem_close);
  if (nr == driver_nr(DRM_VIRTGPU_MAP)) return sizeof(drm_virtgpu_map);
  if (nr == driver_nr(DRM_VIRTGPU_EXECBUFFER)) return sizeof(rvgl_virtgpu_execbuffer);
  if (nr == driver_nr(DRM_VIRTGPU_GETPARAM)) return sizeof(drm_virtgpu_getparam);
  if (nr == driver_nr(DRM_VIRTGPU_WAIT)) return sizeof(drm_virtgpu_3d_wait);
  if (nr == driver_nr(DRM_VIRTGPU_GET_CAPS)) return sizeof(drm_virtgpu_get_caps);
  if (nr == driver_nr(DRM_VIRTGPU_CONTEXT_INIT)) return sizeof(rvgl_virtgpu_context_init);
  if (nr == driver_nr(DRM_VIRTGPU_RESOURCE_CREATE_BLOB))
    return userptr_supported ? sizeof(rvgl_virtgpu_resource_create_blob_userptr)
                             : sizeof(rvgl_virtgpu_resource_create_blob);
  return 0;  // not a virtio-gpu ioctl
}

int FakeVirtgpu::dispatch(File &f, uint32_t nr, std::vector<uint8_t> &k, IoctlCall &call) {
  if (nr == kNrVersion) return do_version(f, k);
  if (nr == kNrGemClose) return do_gem_close(f, k);
  if (nr == driver_nr(DRM_VIRTGPU_MAP)) return do_map(f, k);
  if (nr == driver_nr(DRM_VIRTGPU_EXECBUFFER)) return do_execbuffer(f, k, call);
  if (nr == driver_nr(DRM_VIRTGPU_GETPARAM)) return do_getparam(f, k);
  if (nr == driver_nr(DRM_VIRTGPU_WAIT)) return do_wait(f, k);
  if (nr == driver_nr(DRM_VIRTGPU_GET_CAPS)) return do_get_caps(f, k);
  if (nr == driver_nr(DRM_VIRTGPU_RESOURCE_CREATE_BLOB)) return do_create_blob(f, k);
  if (nr == driver_nr(DRM_VIRTGPU_CONTEXT_INIT)) return do_context_init(f, k, call);
  return -EINVAL;
}

int FakeVirtgpu::do_version(File &f, std::vector<uint8_t> &k) {
  auto *v = reinterpret_cast<drm_version *>(k.data());
  // drm_copy_field: copy what fits, report the whole length.
  auto copy = [](char *buf, size_t &len, const std::string &value) {
    const size_t n = std::min(len, value.size());
    if (n && buf) std::memcpy(buf, value.data(), n);
    len = value.size();
  };
  v->version_major = 0;
  v->version_minor = 1;
  v->version_patchlevel = 0;
  copy(v->name, v->name_len, f.node.driver);
  copy(v->date, v->date_len, "0");
  copy(v->desc, v->desc_len, "fake " + f.node.driver);
  return 0;
}

int FakeVirtgpu::do_getparam(File &f, std::vector<uint8_t> &k) {
  auto *a = reinterpret_cast<drm_virtgpu_getparam *>(k.data());
  auto it = f.node.params.find(a->param);
  if (it == f.node.params.end()) return -EINVAL;
  if (!a->value) return -EFAULT;
  const int value = static_cast<int>(it->second);  // the kernel's `int value`
  std::memcpy(reinterpret_cast<void *>(a->value), &value, sizeof(value));
  return 0;
}

int FakeVirtgpu::do_get_caps(File &, std::vector<uint8_t> &k) {
  auto *a = reinterpret_cast<drm_virtgpu_get_caps *>(k.data());
  if (capsets.empty()) return -ENOSYS;
  if (a->size == 0) return -EINVAL;
  auto it = capsets.find(a->cap_set_id);
  if (it == capsets.end() || it->second.max_version < a->cap_set_ver) return -EINVAL;
  const size_t n = std::min<size_t>(a->size, it->second.bytes.size());
  if (!a->addr) return -EFAULT;
  if (n) std::memcpy(reinterpret_cast<void *>(a->addr), it->second.bytes.data(), n);
  return 0;
}

int FakeVirtgpu::do_context_init(File &f, std::vector<uint8_t> &k, IoctlCall &call) {
  auto *a = reinterpret_cast<rvgl_virtgpu_context_init *>(k.data());
  if (!param(f, VIRTGPU_PARAM_CONTEXT_INIT) || !param(f, VIRTGPU_PARAM_3D_FEATURES)) return -EINVAL;
  if (a->num_params > 4) return -EINVAL;
  if (a->num_params && !a->ctx_set_params) return -EFAULT;
  const auto *p = reinterpret_cast<const rvgl_virtgpu_context_set_param *>(a->ctx_set_params);
  call.ctx_params.assign(p, p + a->num_params);
  if (f.context_created) return -EEXIST;

  const uint64_t capset_ids = f.node.params[VIRTGPU_PARAM_SUPPORTED_CAPSET_IDs];
  uint32_t capset = 0, rings = 0;
  bool rings_set = false;
  uint64_t mask = 0;
  for (const auto &cp : call.ctx_params) {
    switch (cp.param) {
      case VIRTGPU_CONTEXT_PARAM_CAPSET_ID:
        if (cp.value > 63 || !((capset_ids >> cp.value) & 1) || capset) return -EINVAL;
        capset = static_cast<uint32_t>(cp.value);
        break;
      case VIRTGPU_CONTEXT_PARAM_NUM_RINGS:
        if (rings_set || cp.value > RVGL_VIRTGPU_MAX_RINGS) return -EINVAL;
        rings_set = true;
        rings = static_cast<uint32_t>(cp.value);
        break;
      case VIRTGPU_CONTEXT_PARAM_POLL_RINGS_MASK:
        if (mask) return -EINVAL;
        mask = cp.value;
        break;
      default:
        return -EINVAL;
    }
  }
  if (mask) {
    const uint64_t valid = rings >= 64 ? ~0ull : (1ull << rings) - 1;
    if (mask & ~valid) return -EINVAL;
  }
  f.context_created = true;
  f.capset = capset;
  f.num_rings = rings;
  f.rings_set = rings_set;
  f.ring_mask = mask;
  context_capset_ = capset;
  context_rings_ = rings;
  return 0;
}

int FakeVirtgpu::do_create_blob(File &f, std::vector<uint8_t> &k) {
  auto *a = reinterpret_cast<rvgl_virtgpu_resource_create_blob *>(k.data());
  // Only a kernel with the userptr series has the field; an upstream one never reads it.
  const uint64_t userptr =
      userptr_supported
          ? reinterpret_cast<rvgl_virtgpu_resource_create_blob_userptr *>(k.data())->userptr
          : 0;
  uint32_t mask = VIRTGPU_BLOB_FLAG_USE_MAPPABLE | VIRTGPU_BLOB_FLAG_USE_SHAREABLE |
                  VIRTGPU_BLOB_FLAG_USE_CROSS_DEVICE;
  if (userptr_supported) mask |= VIRTGPU_BLOB_FLAG_USE_USERPTR | VIRTGPU_BLOB_FLAG_USERPTR_RDONLY;

  // verify_blob(): every refusal is -EINVAL.
  if (!param(f, VIRTGPU_PARAM_RESOURCE_BLOB)) return -EINVAL;
  if (a->blob_flags & ~mask) return -EINVAL;
  if ((a->blob_flags & VIRTGPU_BLOB_FLAG_USE_CROSS_DEVICE) && !cross_device_uuid) return -EINVAL;
  bool guest = false, host3d = false;
  switch (a->blob_mem) {
    case VIRTGPU_BLOB_MEM_GUEST:
      guest = true;
      break;
    case VIRTGPU_BLOB_MEM_HOST3D_GUEST:
      guest = true;
      host3d = true;
      break;
    case VIRTGPU_BLOB_MEM_HOST3D:
      host3d = true;
      break;
    default:
      return -EINVAL;
  }
  if (host3d) {
    if (!param(f, VIRTGPU_PARAM_3D_FEATURES) || a->cmd_size % 4) return -EINVAL;
  } else if (a->blob_id != 0 || a->cmd_size != 0) {
    return -EINVAL;
  }
  if (param(f, VIRTGPU_PARAM_3D_FEATURES) && !f.context_created) {
    f.context_created = true;  // virtio_gpu_create_context(): a default context, capset 0
    context_capset_ = 0;
  }

  auto bo = std::make_shared<Bo>();
  bo->blob_mem = a->blob_mem;
  bo->blob_flags = a->blob_flags;
  bo->size = a->size;
  if (guest && userptr) {
    const uint64_t page = static_cast<uint64_t>(page_size());
    if (!a->size || a->size % page || userptr % page) return -EINVAL;
    bo->userptr = reinterpret_cast<uint8_t *>(userptr);
    bo->res_id = next_res_++;
    const UserptrPin pin{bo->res_id, a->blob_mem, a->blob_flags, bo->userptr, a->size};
    userptrs_.push_back(pin);
    if (on_userptr) on_userptr(pin);
  } else if (guest) {
    if (!a->size) return -EINVAL;
    bo->memory = make_memfd(a->size);  // the kernel's shmem pages
    if (!bo->memory) return -ENOMEM;
    bo->res_id = next_res_++;
  } else {
    // virtio_gpu_vram_create(): mapping a host blob needs the host-visible region.
    if ((a->blob_flags & VIRTGPU_BLOB_FLAG_USE_MAPPABLE) && !param(f, VIRTGPU_PARAM_HOST_VISIBLE))
      return -EINVAL;
    bo->res_id = next_res_++;
  }
  if (host3d) {
    const HostBlobRequest req{bo->res_id, a->blob_mem, a->blob_flags, a->blob_id, a->size};
    host_blobs_.push_back(req);
    if (!guest) {
      int r = 0;
      if (on_host_blob)
        r = on_host_blob(req, bo->memory);
      else
        bo->memory = make_memfd(a->size);
      if (r < 0) return r;
    }
  }
  bo->handle = f.next_handle++;
  f.handles[bo->handle] = bo;
  a->bo_handle = bo->handle;
  a->res_handle = bo->res_id;
  return 0;
}

int FakeVirtgpu::do_map(File &f, std::vector<uint8_t> &k) {
  auto *a = reinterpret_cast<drm_virtgpu_map *>(k.data());
  auto it = f.handles.find(a->handle);
  if (it == f.handles.end()) return -ENOENT;
  if (!it->second->map_offset) it->second->map_offset = uint64_t{a->handle} << 32;
  a->offset = it->second->map_offset;
  return 0;
}

int FakeVirtgpu::do_gem_close(File &f, std::vector<uint8_t> &k) {
  auto *a = reinterpret_cast<drm_gem_close *>(k.data());
  auto it = f.handles.find(a->handle);
  if (it == f.handles.end()) return -EINVAL;
  auto bo = it->second;
  f.handles.erase(it);
  bo->handle_open = false;
  if (bo->maps == 0) drop_bo(bo->res_id);
  return 0;
}

void FakeVirtgpu::drop_bo(uint32_t res_id) {
  unrefs_.push_back(res_id);
}

int FakeVirtgpu::do_execbuffer(File &f, std::vector<uint8_t> &k, IoctlCall &call) {
  auto *a = reinterpret_cast<rvgl_virtgpu_execbuffer *>(k.data());
  if (!param(f, VIRTGPU_PARAM_3D_FEATURES)) return -ENOSYS;
  constexpr uint32_t kFlags =
      VIRTGPU_EXECBUF_FENCE_FD_IN | VIRTGPU_EXECBUF_FENCE_FD_OUT | VIRTGPU_EXECBUF_RING_IDX;
  if (a->flags & ~kFlags) return -EINVAL;
  const bool ring_given = a->flags & VIRTGPU_EXECBUF_RING_IDX;
  if (ring_given && (!f.rings_set || a->ring_idx >= f.num_rings)) return -EINVAL;
  if (!f.context_created) {
    f.context_created = true;  // virtio_gpu_create_context(): a default context, capset 0
    context_capset_ = 0;
  }
  if (a->num_in_syncobjs || a->num_out_syncobjs) return -EINVAL;  // no syncobjs here

  std::vector<std::shared_ptr<Bo>> bos;
  if (a->num_bo_handles) {
    if (!a->bo_handles) return -EFAULT;
    const auto *h = reinterpret_cast<const uint32_t *>(a->bo_handles);
    call.bo_handles.assign(h, h + a->num_bo_handles);
    for (uint32_t handle : call.bo_handles) {
      auto it = f.handles.find(handle);
      if (it == f.handles.end()) return -ENOENT;
      bos.push_back(it->second);
    }
  }
  if (a->size && !a->command) return -EFAULT;
  const auto *cmd = reinterpret_cast<const uint8_t *>(a->command);
  call.commands.assign(cmd, cmd + a->size);
  if ((a->flags & VIRTGPU_EXECBUF_FENCE_FD_IN) && a->fence_fd < 0) return -EINVAL;

  const bool event = ring_given && ((f.ring_mask >> a->ring_idx) & 1);
  const bool fence_out = a->flags & VIRTGPU_EXECBUF_FENCE_FD_OUT;
  std::shared_ptr<Fence> fence;
  if (fence_out || !bos.empty() || event) {
    fence = std::make_shared<Fence>();
    fence->efd.reset(eventfd(0, EFD_CLOEXEC));
    if (!fence->efd) return -ENOMEM;
    if (event) fence->event_file = f.fd.get();
  }
  int out_fd = -1;
  if (fence_out) {
    out_fd = fcntl(fence->efd.get(), F_DUPFD_CLOEXEC, 0);
    if (out_fd < 0) return -EMFILE;
  }

  if (on_execbuffer) on_execbuffer(a->ring_idx, ring_given, call.commands);

  if (fence) {
    // Kept while an object or the hold list refers to it; the caller's dup outlives it.
    for (auto &bo : bos)
      bo->fences.push_back(fence);
    if (ring_given && ((hold_rings >> a->ring_idx) & 1))
      held_.push_back(fence);
    else
      signal(*fence);
  }
  if (fence_out) a->fence_fd = out_fd;
  return 0;
}

void FakeVirtgpu::signal(Fence &fence) {
  if (fence.signalled) return;
  fence.signalled = true;
  const uint64_t one = 1;
  (void)!::write(fence.efd.get(), &one, sizeof(one));
  if (File *f = file(fence.event_file)) f->events.push_back({VIRTGPU_EVENT_FENCE_SIGNALED, 8});
}

void FakeVirtgpu::release_fences() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto &fence : held_)
    signal(*fence);
  held_.clear();
}

int FakeVirtgpu::do_wait(File &f, std::vector<uint8_t> &k) {
  auto *a = reinterpret_cast<drm_virtgpu_3d_wait *>(k.data());
  auto it = f.handles.find(a->handle);
  if (it == f.handles.end()) return -ENOENT;
  const auto &fences = it->second->fences;
  const bool busy =
      std::any_of(fences.begin(), fences.end(), [](auto &x) { return !x->signalled; });
  if (!busy) return 0;
  return (a->flags & VIRTGPU_WAIT_NOWAIT) ? -EBUSY : 1;  // 1: ioctl() blocks for it
}

// ---------------------------------------------------------------------------------------------
// Mappings, poll, read

int FakeVirtgpu::mmap(void **addr, size_t length, int prot, int flags, int fd, off_t offset) {
  std::lock_guard<std::mutex> lock(mu_);
  File *f = file(fd);
  if (!f) return -ENODEV;
  if (mmap_error) return std::exchange(mmap_error, 0);
  std::shared_ptr<Bo> bo;
  for (auto &[handle, b] : f->handles)
    if (b->map_offset && b->map_offset == static_cast<uint64_t>(offset)) bo = b;
  if (!bo || !bo->memory) return -EINVAL;  // no object there, or a userptr one (no mmap)
  if (bo->blob_mem == VIRTGPU_BLOB_MEM_HOST3D && !(bo->blob_flags & VIRTGPU_BLOB_FLAG_USE_MAPPABLE))
    return -EINVAL;
  if (length > bo->size) return -EINVAL;
  void *p = ::mmap(nullptr, length, prot, flags, bo->memory.get(), 0);
  if (p == MAP_FAILED) return -errno;
  maps_[p] = {bo, length};
  ++bo->maps;
  *addr = p;
  return 0;
}

int FakeVirtgpu::munmap(void *addr, size_t length) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = maps_.find(addr);
  if (it == maps_.end()) return ::munmap(addr, length) < 0 ? -errno : 0;
  if (it->second.second != length) return -EINVAL;  // the transport unmaps what it mapped
  ::munmap(addr, length);
  auto bo = it->second.first;
  maps_.erase(it);
  if (--bo->maps == 0 && !bo->handle_open) drop_bo(bo->res_id);
  return 0;
}

int FakeVirtgpu::poll(pollfd *fds, nfds_t count, int timeout_ms) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (count == 1) {
      if (File *f = file(fds[0].fd)) {
        fds[0].revents = f->events.empty() ? 0 : POLLIN;
        return fds[0].revents ? 1 : 0;
      }
    }
  }
  const int r = ::poll(fds, count, timeout_ms);  // fence fds are real eventfds
  return r < 0 ? -errno : r;
}

ssize_t FakeVirtgpu::read(int fd, void *buf, size_t size) {
  std::lock_guard<std::mutex> lock(mu_);
  File *f = file(fd);
  if (!f) {
    const ssize_t r = ::read(fd, buf, size);
    return r < 0 ? -errno : r;
  }
  size_t n = 0;
  while (!f->events.empty() && n + f->events.front().length <= size) {
    std::memcpy(static_cast<uint8_t *>(buf) + n, &f->events.front(), sizeof(drm_event));
    n += f->events.front().length;
    f->events.pop_front();
  }
  return n ? static_cast<ssize_t>(n) : -EAGAIN;
}

// ---------------------------------------------------------------------------------------------
// Inspection

std::vector<IoctlCall> FakeVirtgpu::calls() const {
  std::lock_guard<std::mutex> lock(mu_);
  return calls_;
}

std::vector<IoctlCall> FakeVirtgpu::calls(uint32_t nr) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<IoctlCall> out;
  for (const auto &c : calls_)
    if (c.nr == nr) out.push_back(c);
  return out;
}

std::vector<UserptrPin> FakeVirtgpu::userptrs() const {
  std::lock_guard<std::mutex> lock(mu_);
  return userptrs_;
}

std::vector<HostBlobRequest> FakeVirtgpu::host_blobs() const {
  std::lock_guard<std::mutex> lock(mu_);
  return host_blobs_;
}

std::vector<uint32_t> FakeVirtgpu::unrefs() const {
  std::lock_guard<std::mutex> lock(mu_);
  return unrefs_;
}

std::vector<std::string> FakeVirtgpu::opened() const {
  std::lock_guard<std::mutex> lock(mu_);
  return opened_;
}

int FakeVirtgpu::last_open_flags() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_open_flags_;
}

size_t FakeVirtgpu::open_files() const {
  std::lock_guard<std::mutex> lock(mu_);
  return files_.size();
}

size_t FakeVirtgpu::live_handles() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (const auto &[fd, f] : files_)
    n += f->handles.size();
  return n;
}

size_t FakeVirtgpu::live_mappings() const {
  std::lock_guard<std::mutex> lock(mu_);
  return maps_.size();
}

size_t FakeVirtgpu::pending_fences() const {
  std::lock_guard<std::mutex> lock(mu_);
  return held_.size();
}

uint32_t FakeVirtgpu::context_capset() const {
  std::lock_guard<std::mutex> lock(mu_);
  return context_capset_;
}

uint32_t FakeVirtgpu::context_rings() const {
  std::lock_guard<std::mutex> lock(mu_);
  return context_rings_;
}

}  // namespace rvgl::guest::test
