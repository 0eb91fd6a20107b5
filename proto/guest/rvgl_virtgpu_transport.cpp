#include "rvgl_virtgpu_transport.h"

#include <poll.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <optional>

#include "virtgpu_device.h"
#include "virtgpu_mapping.h"
#include "virtgpu_node.h"
#include "virtgpu_uapi.h"

namespace rvgl::guest {

using virtgpu::Device;
using virtgpu::DeviceMapping;

namespace {

constexpr uint32_t kUserptrFlags = RVGL_BLOB_FLAG_USERPTR | RVGL_BLOB_FLAG_USERPTR_RDONLY;

Error ioctl_error(int r, const std::string &what) {
  return make_error(r, "virtio-gpu: " + what + ": " + std::strerror(-r));
}

bool is_guest_blob(uint32_t blob_mem) {
  return blob_mem == RVGL_BLOB_MEM_GUEST || blob_mem == RVGL_BLOB_MEM_HOST3D_GUEST;
}

std::string blob_desc(const BlobParams &p) {
  return "RESOURCE_CREATE_BLOB(blob_mem " + std::to_string(p.blob_mem) + ", flags " +
         std::to_string(p.blob_flags) + ", blob_id " + std::to_string(p.blob_id) + ", size " +
         std::to_string(p.size) + ")";
}

std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace

VirtgpuTransport::VirtgpuTransport(std::unique_ptr<Device> dev, const VirtgpuOptions &options,
                                   std::string node_path)
    : dev_(std::move(dev)),
      options_(options),
      node_path_(std::move(node_path)),
      mappings_(std::make_unique<virtgpu::MappingTable>()) {}

VirtgpuTransport::~VirtgpuTransport() {
  mappings_->clear();  // before the node they were made from closes
  dev_.reset();
}

Result<std::unique_ptr<VirtgpuTransport>> VirtgpuTransport::open(const VirtgpuOptions &options) {
  VirtgpuSyscalls &sys = options.syscalls ? *options.syscalls : system_virtgpu_syscalls();
  if (!options.node_path.empty()) {
    auto dev = virtgpu::open_virtgpu_node(sys, options.node_path);
    if (!dev) return dev.error();
    return from_device(std::move(*dev), options, options.node_path);
  }

  auto paths = virtgpu::render_node_paths(sys);
  if (!paths) return paths.error();
  std::string skipped;
  std::optional<Error> unsuitable;  // why the last virtio-gpu node would not do
  for (const auto &path : *paths) {
    auto dev = virtgpu::open_virtgpu_node(sys, path);
    if (!dev) {
      skipped += "; " + dev.error().message;
      continue;
    }
    auto t = from_device(std::move(*dev), options, path);
    if (t) return t;
    unsuitable = t.error();
  }
  if (unsuitable) return *unsuitable;
  return make_error(-ENODEV, std::string("virtio-gpu: no ") + virtgpu::kDriverName +
                                 " render node in " + virtgpu::kDriDirectory + skipped);
}

Result<std::unique_ptr<VirtgpuTransport>> VirtgpuTransport::adopt(int fd,
                                                                  const VirtgpuOptions &options) {
  VirtgpuSyscalls &sys = options.syscalls ? *options.syscalls : system_virtgpu_syscalls();
  if (fd < 0) return make_error(-EBADF, "virtio-gpu: no render node fd");
  Device dev(sys, fd);
  auto name = dev.driver_name();
  if (!name) return name.error();
  if (*name != virtgpu::kDriverName)
    return make_error(-ENODEV,
                      "virtio-gpu: the fd is driven by " + *name + ", not " + virtgpu::kDriverName);
  return from_device(std::move(dev), options, std::string());
}

Result<std::unique_ptr<VirtgpuTransport>> VirtgpuTransport::from_device(
    Device &&dev, const VirtgpuOptions &options, std::string node_path) {
  std::unique_ptr<VirtgpuTransport> t(new VirtgpuTransport(std::make_unique<Device>(std::move(dev)),
                                                           options, std::move(node_path)));
  if (auto s = t->probe(); !s) return s.error();
  return t;
}

Status VirtgpuTransport::probe() {
  const std::string where = node_path_.empty() ? std::string("the render node") : node_path_;
  auto param = [&](uint64_t id, const char *name, uint64_t &out) -> Status {
    const int r = dev_->get_param(id, out);
    if (r == -EINVAL) {  // a kernel too old to know the parameter: the feature is absent
      out = 0;
      return {};
    }
    if (r < 0) return ioctl_error(r, std::string("GETPARAM ") + name + " on " + where);
    return {};
  };
  uint64_t v3d = 0, blob = 0, visible = 0, cross = 0, init = 0, capsets = 0;
  const struct {
    uint64_t id;
    const char *name;
    uint64_t *out;
  } wanted[] = {
      {VIRTGPU_PARAM_3D_FEATURES, "3D_FEATURES", &v3d},
      {VIRTGPU_PARAM_RESOURCE_BLOB, "RESOURCE_BLOB", &blob},
      {VIRTGPU_PARAM_HOST_VISIBLE, "HOST_VISIBLE", &visible},
      {VIRTGPU_PARAM_CROSS_DEVICE, "CROSS_DEVICE", &cross},
      {VIRTGPU_PARAM_CONTEXT_INIT, "CONTEXT_INIT", &init},
      {VIRTGPU_PARAM_SUPPORTED_CAPSET_IDs, "SUPPORTED_CAPSET_IDs", &capsets},
  };
  for (const auto &w : wanted)
    if (auto s = param(w.id, w.name, *w.out); !s) return s;
  params_.has_3d = v3d != 0;
  params_.resource_blob = blob != 0;
  params_.host_visible = visible != 0;
  params_.cross_device = cross != 0;
  params_.context_init = init != 0;
  params_.capset_ids = capsets & 0xffffffffu;  // an int on the kernel's side

  auto missing = [&](const char *what, const char *why) {
    return make_error(-ENODEV, "virtio-gpu: " + where + " has no " + what + ": " + why);
  };
  if (!params_.has_3d)
    return missing("3D support (VIRTGPU_PARAM_3D_FEATURES)",
                   "the host runs no virglrenderer contexts for it");
  if (!params_.resource_blob)
    return missing("blob resources (VIRTGPU_PARAM_RESOURCE_BLOB)",
                   "the shared page and every object are blobs");
  if (!params_.host_visible)
    return missing("host-visible memory (VIRTGPU_PARAM_HOST_VISIBLE)",
                   "host blobs such as the shared page cannot be mapped");
  if (!params_.context_init)
    return missing("context init (VIRTGPU_PARAM_CONTEXT_INIT)",
                   "contexts of a chosen capset and fence rings need it");
  if (options_.required_capset_id && !offers_capset(options_.required_capset_id))
    return make_error(-ENOENT, "virtio-gpu: " + where + " offers no capset " +
                                   std::to_string(options_.required_capset_id) +
                                   " (SUPPORTED_CAPSET_IDs " + hex(params_.capset_ids) + ")");
  return {};
}

bool VirtgpuTransport::offers_capset(uint32_t capset_id) const {
  // Ids the int-sized answer cannot show are left to the ioctls to judge.
  if (capset_id >= 32) return true;
  return (params_.capset_ids >> capset_id) & 1;
}

Result<std::vector<uint8_t>> VirtgpuTransport::get_capset(uint32_t capset_id, uint32_t version) {
  const std::string which =
      "capset " + std::to_string(capset_id) + " at version " + std::to_string(version);
  if (!offers_capset(capset_id))
    return make_error(-ENOENT, "virtio-gpu: the host offers no " + which);
  if (options_.capset_size == 0) return make_error(-EINVAL, "virtio-gpu: capset_size 0");
  std::vector<uint8_t> caps(options_.capset_size, 0);
  const int r = dev_->get_caps(capset_id, version, caps);
  // virtio_gpu_get_caps_ioctl: -EINVAL for an unknown id or a version above the host's maximum,
  // -ENOSYS when the host has no capsets at all.
  if (r == -EINVAL || r == -ENOSYS)
    return make_error(-ENOENT, "virtio-gpu: the host offers no " + which);
  if (r < 0) return ioctl_error(r, "GET_CAPS of " + which);
  return caps;
}

Status VirtgpuTransport::init_context(uint32_t capset_id, uint32_t num_rings) {
  if (context_ready_) return make_error(-EALREADY, "virtio-gpu: context already created");
  if (capset_id == 0 || capset_id >= 64)
    return make_error(-EINVAL, "virtio-gpu: capset id " + std::to_string(capset_id));
  if (num_rings > RVGL_VIRTGPU_MAX_RINGS)
    return make_error(-EINVAL, "virtio-gpu: at most " + std::to_string(RVGL_VIRTGPU_MAX_RINGS) +
                                   " rings, not " + std::to_string(num_rings));
  const uint64_t mask = options_.poll_rings_mask;
  if (num_rings < 64 && (mask >> num_rings) != 0)
    return make_error(-EINVAL, "virtio-gpu: poll_rings_mask " + hex(mask) + " names rings past " +
                                   std::to_string(num_rings));
  if (!offers_capset(capset_id))
    return make_error(-ENOENT,
                      "virtio-gpu: the host offers no capset " + std::to_string(capset_id));

  rvgl_virtgpu_context_set_param params[3];
  size_t n = 0;
  params[n++] = {VIRTGPU_CONTEXT_PARAM_CAPSET_ID, capset_id};
  // Without NUM_RINGS the context has no ring timelines and every RING_IDX submit is refused.
  if (num_rings) params[n++] = {VIRTGPU_CONTEXT_PARAM_NUM_RINGS, num_rings};
  if (mask) params[n++] = {VIRTGPU_CONTEXT_PARAM_POLL_RINGS_MASK, mask};
  const int r = dev_->context_init({params, n});
  if (r == -EEXIST)
    return make_error(r,
                      "virtio-gpu: this render node fd already has a context (another user of "
                      "the fd made one first)");
  if (r < 0)
    return ioctl_error(r, "CONTEXT_INIT(capset " + std::to_string(capset_id) + ", " +
                              std::to_string(num_rings) + " rings)");
  context_ready_ = true;
  num_rings_ = num_rings;
  return {};
}

Result<Blob> VirtgpuTransport::create_blob(const BlobParams &p) {
  // Blob and execbuffer ioctls on a file without a context make the kernel create a default
  // (virgl) one, after which CONTEXT_INIT fails: refuse them until init_context.
  if (!context_ready_) return make_error(-EINVAL, "virtio-gpu: create the context first");
  if (!is_guest_blob(p.blob_mem) && p.blob_mem != RVGL_BLOB_MEM_HOST3D)
    return make_error(-EINVAL, "virtio-gpu: unknown blob_mem " + std::to_string(p.blob_mem));
  if (p.size == 0) return make_error(-EINVAL, "virtio-gpu: blob size 0");
  if (p.blob_flags & kUserptrFlags) return create_userptr_blob(p);
  if (!p.guest_memory.empty())
    return make_error(-EINVAL,
                      "virtio-gpu: guest memory is shared only as userptr (set "
                      "RVGL_BLOB_FLAG_USERPTR or RVGL_BLOB_FLAG_USERPTR_RDONLY)");

  rvgl_virtgpu_resource_create_blob args{};
  args.blob_mem = p.blob_mem;
  args.blob_flags = p.blob_flags;
  args.size = p.size;
  args.blob_id = p.blob_id;
  if (const int r = dev_->create_blob(args); r < 0) return ioctl_error(r, blob_desc(p));
  Blob b;
  b.res_id = args.res_handle;
  b.handle = args.bo_handle;
  b.blob_mem = p.blob_mem;
  b.blob_flags = p.blob_flags;
  b.size = p.size;
  return b;
}

Result<Blob> VirtgpuTransport::create_userptr_blob(const BlobParams &p) {
  if (!is_guest_blob(p.blob_mem))
    return make_error(-EINVAL,
                      "virtio-gpu: userptr blobs are GUEST or HOST3D_GUEST, not blob_mem " +
                          std::to_string(p.blob_mem));
  if (p.guest_memory.empty())
    return make_error(-EINVAL, "virtio-gpu: a userptr blob needs the guest memory it shares");
  // The kernel pins exactly `size` bytes from the address: anything else would pin pages the
  // caller did not hand over.
  if (p.guest_memory.size() != p.size)
    return make_error(-EINVAL, "virtio-gpu: userptr of " + std::to_string(p.guest_memory.size()) +
                                   " bytes for a blob of " + std::to_string(p.size));
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const uint64_t addr = reinterpret_cast<uintptr_t>(p.guest_memory.data());
  if (addr % page || p.size % page)
    return make_error(-EINVAL, "virtio-gpu: userptr memory must start and end on a page (" +
                                   std::to_string(page) + " bytes)");

  rvgl_virtgpu_resource_create_blob_userptr args{};
  args.base.blob_mem = p.blob_mem;
  args.base.blob_flags = p.blob_flags;
  args.base.size = p.size;
  args.base.blob_id = p.blob_id;
  args.userptr = addr;
  if (const int r = dev_->create_blob_userptr(args); r < 0) {
    Error e = ioctl_error(r, blob_desc(p) + " with userptr");
    if (r == -EINVAL)
      e.message += " (a guest kernel without the virtio-gpu userptr series refuses it)";
    return e;
  }
  Blob b;
  b.res_id = args.base.res_handle;
  b.handle = args.base.bo_handle;
  b.blob_mem = p.blob_mem;
  b.blob_flags = p.blob_flags;
  b.size = p.size;
  b.memory = p.guest_memory;  // the host sees these very pages
  return b;
}

Status VirtgpuTransport::map_blob(Blob &blob) {
  if (!blob.memory.empty()) return {};  // a userptr blob, or mapped already
  if (blob.handle == 0) return make_error(-EINVAL, "virtio-gpu: the blob has no GEM handle");
  if (auto m = mappings_->find(blob.handle); !m.empty()) {
    blob.memory = m;
    return {};
  }
  if (!(blob.blob_flags & RVGL_BLOB_FLAG_USE_MAPPABLE))
    return make_error(-EINVAL, "virtio-gpu: the blob was not created RVGL_BLOB_FLAG_USE_MAPPABLE");
  if (blob.size > std::numeric_limits<size_t>::max())
    return make_error(-E2BIG, "virtio-gpu: blob too large to map");

  uint64_t offset = 0;
  if (const int r = dev_->map_offset(blob.handle, offset); r < 0)
    return ioctl_error(r, "MAP of handle " + std::to_string(blob.handle));
  if (offset > static_cast<uint64_t>(std::numeric_limits<off_t>::max()))
    return make_error(-EOVERFLOW, "virtio-gpu: MAP offset " + hex(offset));
  void *addr = nullptr;
  const size_t size = static_cast<size_t>(blob.size);
  if (const int r = dev_->sys().mmap(&addr, size, PROT_READ | PROT_WRITE, MAP_SHARED, dev_->fd(),
                                     static_cast<off_t>(offset));
      r < 0)
    return ioctl_error(r, "mmap of handle " + std::to_string(blob.handle));
  blob.memory = mappings_->add(blob.handle, DeviceMapping(dev_->sys(), addr, size));
  return {};
}

Status VirtgpuTransport::unref_blob(Blob &&blob) {
  Blob gone = std::move(blob);
  if (gone.handle == 0) return make_error(-EINVAL, "virtio-gpu: the blob has no GEM handle");
  mappings_->remove(gone.handle);
  // The resource goes with its last handle (the kernel sends RESOURCE_UNREF then).
  if (const int r = dev_->gem_close(gone.handle); r < 0)
    return ioctl_error(r, "GEM_CLOSE of handle " + std::to_string(gone.handle));
  return {};
}

Result<Fence> VirtgpuTransport::submit(const SubmitParams &p) {
  return submit(p, {});
}

Result<Fence> VirtgpuTransport::submit(const SubmitParams &p,
                                       std::span<const uint32_t> bo_handles) {
  if (!context_ready_) return make_error(-EINVAL, "virtio-gpu: create the context first");
  if (p.commands.size() % 4)
    return make_error(-EINVAL, "virtio-gpu: command buffer not whole dwords");
  if (p.commands.size() > std::numeric_limits<uint32_t>::max() ||
      bo_handles.size() > std::numeric_limits<uint32_t>::max())
    return make_error(-E2BIG, "virtio-gpu: command buffer too large for one EXECBUFFER");
  if (p.ring_idx && *p.ring_idx >= num_rings_)
    return make_error(-EINVAL, "virtio-gpu: ring index " + std::to_string(*p.ring_idx) +
                                   ", the context has " + std::to_string(num_rings_) + " rings");

  rvgl_virtgpu_execbuffer args{};
  args.flags = (p.ring_idx ? VIRTGPU_EXECBUF_RING_IDX : 0u) |
               (p.want_fence ? VIRTGPU_EXECBUF_FENCE_FD_OUT : 0u);
  args.size = static_cast<uint32_t>(p.commands.size());
  args.command = reinterpret_cast<uintptr_t>(p.commands.data());
  args.bo_handles = reinterpret_cast<uintptr_t>(bo_handles.data());
  args.num_bo_handles = static_cast<uint32_t>(bo_handles.size());
  args.fence_fd = -1;
  args.ring_idx = p.ring_idx ? *p.ring_idx : 0;
  if (const int r = dev_->execbuffer(args); r < 0) return ioctl_error(r, "EXECBUFFER");
  Fence f;
  if (p.want_fence) {
    if (args.fence_fd < 0)
      return make_error(-EIO, "virtio-gpu: EXECBUFFER succeeded without an out-fence fd");
    f.fd.reset(args.fence_fd);
  }
  return f;
}

Result<bool> VirtgpuTransport::wait(const Fence &fence, std::chrono::milliseconds timeout) {
  if (!fence.fd) return make_error(-EINVAL, "virtio-gpu: not a virtio-gpu fence (no sync_file)");
  using Clock = std::chrono::steady_clock;
  const bool forever = timeout == kWaitForever;
  const auto until = forever ? Clock::time_point::max() : Clock::now() + timeout;
  for (;;) {
    int ms = -1;
    if (!forever) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(until - Clock::now()).count();
      ms = left < 0 ? 0 : left > INT32_MAX ? INT32_MAX : static_cast<int>(left);
    }
    // A sync_file is readable once its fence has signalled, and stays so.
    pollfd pfd{fence.fd.get(), POLLIN, 0};
    const int r = dev_->sys().poll(&pfd, 1, ms);
    if (r == -EINTR) continue;
    if (r < 0) return ioctl_error(r, "poll on a fence");
    if (r > 0) {
      if (pfd.revents & POLLIN) return true;
      return make_error(-EIO, "virtio-gpu: the fence fd reported an error");
    }
    if (ms == 0 || Clock::now() >= until) return false;
  }
}

Result<bool> VirtgpuTransport::wait_idle(const Blob &blob, bool block) {
  if (blob.handle == 0) return make_error(-EINVAL, "virtio-gpu: the blob has no GEM handle");
  const int r = dev_->wait(blob.handle, block ? 0u : static_cast<uint32_t>(VIRTGPU_WAIT_NOWAIT));
  if (r == 0) return true;
  if (r == -EBUSY) return false;
  return ioctl_error(r, "WAIT on handle " + std::to_string(blob.handle));
}

int VirtgpuTransport::event_fd() const {
  return dev_->fd();
}

Result<uint32_t> VirtgpuTransport::read_fence_events() {
  uint32_t fences = 0;
  for (;;) {
    pollfd pfd{dev_->fd(), POLLIN, 0};
    const int r = dev_->sys().poll(&pfd, 1, 0);
    if (r == -EINTR) continue;
    if (r < 0) return ioctl_error(r, "poll on the render node");
    if (r == 0 || !(pfd.revents & POLLIN)) return fences;
    // drm_read() hands out whole events only, as many as fit.
    alignas(drm_event) uint8_t buf[4096];
    const ssize_t n = dev_->sys().read(dev_->fd(), buf, sizeof(buf));
    if (n == -EINTR) continue;
    if (n == -EAGAIN || n == 0) return fences;
    if (n < 0) return ioctl_error(static_cast<int>(n), "read of DRM events");
    size_t off = 0;
    while (off + sizeof(drm_event) <= static_cast<size_t>(n)) {
      drm_event e;
      std::memcpy(&e, buf + off, sizeof(e));
      if (e.length < sizeof(e) || off + e.length > static_cast<size_t>(n))
        return make_error(-EIO,
                          "virtio-gpu: malformed DRM event of length " + std::to_string(e.length));
      if (e.type == VIRTGPU_EVENT_FENCE_SIGNALED) ++fences;
      off += e.length;
    }
  }
}

}  // namespace rvgl::guest
