// The guest transport inside a VM: the virtio-gpu DRM render node of the guest kernel.
//
//   get_capset    DRM_IOCTL_VIRTGPU_GET_CAPS
//   init_context  DRM_IOCTL_VIRTGPU_CONTEXT_INIT (CAPSET_ID, NUM_RINGS, POLL_RINGS_MASK)
//   create_blob   DRM_IOCTL_VIRTGPU_RESOURCE_CREATE_BLOB; userptr blobs with the field of the
//                 virtio-gpu userptr series (see virtgpu_uapi.h for the layout assumed)
//   map_blob      DRM_IOCTL_VIRTGPU_MAP, then mmap of the render node
//   unref_blob    munmap, DRM_IOCTL_GEM_CLOSE (the kernel drops the resource with the handle)
//   submit        DRM_IOCTL_VIRTGPU_EXECBUFFER with RING_IDX and FENCE_FD_OUT
//   wait          poll() on the sync_file the submit returned
//
// Opening checks the device first: 3D (virgl) support, blob resources, host-visible memory (the
// shared page is a mappable host blob), context init, and that the capset is offered.
//
// CPU mappings live on the render node like the GEM handles do, so the transport owns them
// (Blob::memory points into them, Blob::mapping stays empty); unref_blob or the transport's end
// removes them. Userptr blobs are the caller's own pages: Blob::memory is the span it passed, and
// it must stay mapped until unref_blob.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "rvgl_transport.h"
#include "rvgl_virtgpu_syscalls.h"

namespace rvgl::guest {

namespace virtgpu {
class Device;
class MappingTable;
}  // namespace virtgpu

struct VirtgpuOptions {
  // The render node; empty: the first /dev/dri/renderD* whose driver is virtio_gpu and that
  // offers `required_capset_id`.
  std::string node_path;
  // Refuse a device whose SUPPORTED_CAPSET_IDs lacks this id (-ENOENT); 0 skips the check.
  uint32_t required_capset_id = RVGL_CAPSET_ID;
  // Bytes GET_CAPS reads. virtio-gpu does not tell the guest how long a capset is: the kernel
  // copies min(this, the host's size) and the rest stays zero.
  uint32_t capset_size = sizeof(rvgl_capset);
  // Rings whose fences also arrive as DRM events (VIRTGPU_EVENT_FENCE_SIGNALED) on event_fd(),
  // for callers that wait on many rings through one fd. The kernel holds at most a few hundred
  // undelivered events per file, so whoever sets this must call read_fence_events(). Kernels
  // before the fix of October 2023 that reads context parameters as 64 bits took the mask as 32
  // bits: there, rings 32 and up give no events.
  uint64_t poll_rings_mask = 0;
  // The system calls to make; null: the real ones. Must outlive the transport.
  VirtgpuSyscalls *syscalls = nullptr;
};

// What GETPARAM reported about the device.
struct VirtgpuParams {
  bool has_3d = false;         // VIRTGPU_PARAM_3D_FEATURES
  bool resource_blob = false;  // VIRTGPU_PARAM_RESOURCE_BLOB
  bool host_visible = false;   // VIRTGPU_PARAM_HOST_VISIBLE
  bool cross_device = false;   // VIRTGPU_PARAM_CROSS_DEVICE
  bool context_init = false;   // VIRTGPU_PARAM_CONTEXT_INIT
  // VIRTGPU_PARAM_SUPPORTED_CAPSET_IDs: bit n for capset id n. The kernel reports an int, so only
  // ids below 32 can be seen.
  uint64_t capset_ids = 0;
};

class VirtgpuTransport final : public Transport {
 public:
  // Opens the render node (options.node_path, or the first that fits) and checks it.
  static Result<std::unique_ptr<VirtgpuTransport>> open(const VirtgpuOptions &options = {});
  // The same on a render node fd the caller already has; the transport owns it from now on,
  // also when this fails (it is closed through options.syscalls).
  static Result<std::unique_ptr<VirtgpuTransport>> adopt(int fd,
                                                         const VirtgpuOptions &options = {});

  ~VirtgpuTransport() override;
  VirtgpuTransport(const VirtgpuTransport &) = delete;
  VirtgpuTransport &operator=(const VirtgpuTransport &) = delete;

  const char *name() const override { return "virtio-gpu"; }
  Result<std::vector<uint8_t>> get_capset(uint32_t capset_id, uint32_t version) override;
  Status init_context(uint32_t capset_id, uint32_t num_rings) override;
  Result<Blob> create_blob(const BlobParams &params) override;
  Status map_blob(Blob &blob) override;
  Status unref_blob(Blob &&blob) override;
  Result<Fence> submit(const SubmitParams &params) override;
  Result<bool> wait(const Fence &fence, std::chrono::milliseconds timeout) override;

  // submit() naming the blobs (Blob::handle) the host will touch: the kernel attaches the fence
  // to them, so wait_idle() on one of them waits for it.
  Result<Fence> submit(const SubmitParams &params, std::span<const uint32_t> bo_handles);
  // DRM_IOCTL_VIRTGPU_WAIT: true when every fence attached to the blob has signalled. With
  // `block` false it only looks; with true the kernel waits (up to its own 15 s) first.
  Result<bool> wait_idle(const Blob &blob, bool block);

  // The render node's fd, readable when DRM events are pending (options.poll_rings_mask).
  int event_fd() const;
  // Reads the pending DRM events without blocking; returns how many were fence events.
  Result<uint32_t> read_fence_events();

  const VirtgpuParams &params() const { return params_; }
  const std::string &node_path() const { return node_path_; }
  bool context_ready() const { return context_ready_; }

 private:
  VirtgpuTransport(std::unique_ptr<virtgpu::Device> dev, const VirtgpuOptions &options,
                   std::string node_path);
  static Result<std::unique_ptr<VirtgpuTransport>> from_device(virtgpu::Device &&dev,
                                                               const VirtgpuOptions &options,
                                                               std::string node_path);
  Status probe();
  bool offers_capset(uint32_t capset_id) const;
  Result<Blob> create_userptr_blob(const BlobParams &params);

  std::unique_ptr<virtgpu::Device> dev_;
  VirtgpuOptions options_;
  std::string node_path_;
  VirtgpuParams params_;
  bool context_ready_ = false;
  uint32_t num_rings_ = 0;
  std::unique_ptr<virtgpu::MappingTable> mappings_;  // CPU mappings of this node's blobs
};

}  // namespace rvgl::guest
