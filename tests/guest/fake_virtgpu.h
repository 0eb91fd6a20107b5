// A virtio-gpu render node in-process, behind VirtgpuSyscalls. It answers the ioctls the way the
// guest kernel's virtio-gpu driver does (drivers/gpu/drm/virtio/virtgpu_ioctl.c and
// virtgpu_submit.c: the argument checks, the error codes, drm_ioctl()'s zero-extension of short
// arguments), with the userptr series of seed 002 on top when `userptr_supported`. The host behind
// the device is the test's, through callbacks. Every call is recorded, and any ioctl can be made to
// fail, so the transport can be checked ioctl by ioctl without a VM.
//
// Fds it hands out are real (eventfds), so the transport's UniqueFd and poll() work on them:
// the render node's fd stands for the file, each fence is an eventfd the "host" writes when it
// signals (a sync_file is readable once signalled, and an eventfd that nobody reads stays so).
// Mappings are real mappings of memfds: what the guest writes through one the host reads.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "rvgl_unique_fd.h"
#include "rvgl_virtgpu_syscalls.h"
#include "virtgpu_uapi.h"

namespace rvgl::guest::test {

// GETPARAM answers of a device that has everything the transport needs, offering these capsets.
std::map<uint64_t, uint64_t> full_virtgpu_params(uint64_t capset_ids = 1u << 8);

struct FakeNode {
  std::string name = "renderD128";  // under /dev/dri
  std::string driver = "virtio_gpu";
  std::map<uint64_t, uint64_t> params = full_virtgpu_params();  // ids absent: -EINVAL
};

struct FakeCapset {
  uint32_t max_version = 1;
  std::vector<uint8_t> bytes;  // the host's capset (its max_size is bytes.size())
};

// One ioctl as the caller issued it.
struct IoctlCall {
  unsigned long request = 0;
  uint32_t nr = 0;          // _IOC_NR
  std::vector<uint8_t> in;  // the argument as passed (_IOC_SIZE bytes)
  int result = 0;
  // CONTEXT_INIT: the parameter array; EXECBUFFER: the command bytes and the bo handles.
  std::vector<rvgl_virtgpu_context_set_param> ctx_params;
  std::vector<uint8_t> commands;
  std::vector<uint32_t> bo_handles;

  template <class T>
  T arg() const {
    T v{};
    std::memcpy(&v, in.data(), in.size() < sizeof(T) ? in.size() : sizeof(T));
    return v;
  }
};

// A blob the host was asked for.
struct HostBlobRequest {
  uint32_t res_id = 0;
  uint32_t blob_mem = 0;
  uint32_t blob_flags = 0;
  uint64_t blob_id = 0;
  uint64_t size = 0;
};

// A userptr blob as the host receives it: the guest pages (here: the very address) and flags.
struct UserptrPin {
  uint32_t res_id = 0;
  uint32_t blob_mem = 0;
  uint32_t blob_flags = 0;
  uint8_t *addr = nullptr;
  uint64_t size = 0;
};

struct IoctlFault {
  uint32_t nr = 0;   // _IOC_NR of the ioctl to fail
  unsigned nth = 1;  // its nth call fails (counted per nr, from 1)
  int error = -EIO;  // returned
};

class FakeVirtgpu final : public VirtgpuSyscalls {
 public:
  FakeVirtgpu();
  ~FakeVirtgpu() override;
  FakeVirtgpu(const FakeVirtgpu &) = delete;
  FakeVirtgpu &operator=(const FakeVirtgpu &) = delete;

  // ---- configuration, before the transport opens ----
  std::vector<FakeNode> nodes{FakeNode{}};
  std::vector<std::string> other_dri_entries{"card0", "by-path"};
  bool has_dri_directory = true;
  std::map<uint32_t, FakeCapset> capsets;
  bool userptr_supported = true;   // false: an upstream kernel (48-byte blob ioctl, no flags)
  bool cross_device_uuid = false;  // VIRTGPU_BLOB_FLAG_USE_CROSS_DEVICE allowed
  uint64_t hold_rings = 0;         // fences on these rings wait for release_fences()
  std::vector<IoctlFault> faults;
  int mmap_error = 0;                         // next mmap of the render node fails with it
  std::chrono::milliseconds wait_bound{200};  // the kernel waits 15 s in a blocking WAIT
  // The host: a HOST3D blob's memory (0 and an fd to map, or -errno to refuse the blob; default:
  // a zeroed memfd), what a userptr blob pins, and each EXECBUFFER's commands.
  std::function<int(const HostBlobRequest &, UniqueFd &memory)> on_host_blob;
  std::function<void(const UserptrPin &)> on_userptr;
  std::function<void(uint32_t ring_idx, bool ring_given, std::span<const uint8_t>)> on_execbuffer;

  // ---- inspection, any time ----
  std::vector<IoctlCall> calls() const;
  std::vector<IoctlCall> calls(uint32_t nr) const;
  std::vector<UserptrPin> userptrs() const;
  std::vector<HostBlobRequest> host_blobs() const;
  std::vector<uint32_t> unrefs() const;     // resource ids the host was told to drop, in order
  std::vector<std::string> opened() const;  // paths opened, in order
  int last_open_flags() const;
  size_t open_files() const;
  size_t live_handles() const;
  size_t live_mappings() const;
  size_t pending_fences() const;
  uint32_t context_capset() const;  // of the last file that made one; 0: none
  uint32_t context_rings() const;

  // Signals every held fence, as the host's retire would.
  void release_fences();

  // ---- VirtgpuSyscalls ----
  int open(const char *path, int flags) override;
  int close(int fd) override;
  int ioctl(int fd, unsigned long request, void *arg) override;
  int mmap(void **addr, size_t length, int prot, int flags, int fd, off_t offset) override;
  int munmap(void *addr, size_t length) override;
  int poll(pollfd *fds, nfds_t count, int timeout_ms) override;
  ssize_t read(int fd, void *buf, size_t size) override;
  int list_dir(const char *path, std::vector<std::string> &names) override;

 private:
  struct Fence;
  struct Bo;
  struct File;

  size_t kernel_arg_size(uint32_t nr) const;
  int dispatch(File &f, uint32_t nr, std::vector<uint8_t> &k, IoctlCall &call);
  int do_version(File &f, std::vector<uint8_t> &k);
  int do_getparam(File &f, std::vector<uint8_t> &k);
  int do_get_caps(File &f, std::vector<uint8_t> &k);
  int do_context_init(File &f, std::vector<uint8_t> &k, IoctlCall &call);
  int do_create_blob(File &f, std::vector<uint8_t> &k);
  int do_map(File &f, std::vector<uint8_t> &k);
  int do_gem_close(File &f, std::vector<uint8_t> &k);
  int do_execbuffer(File &f, std::vector<uint8_t> &k, IoctlCall &call);
  int do_wait(File &f, std::vector<uint8_t> &k);
  bool param(const File &f, uint64_t id) const;
  void signal(Fence &fence);      // with mu_ held
  void drop_bo(uint32_t res_id);  // with mu_ held: the host's RESOURCE_UNREF
  File *file(int fd);

  mutable std::mutex mu_;
  std::map<int, std::unique_ptr<File>> files_;                     // by fd
  std::map<void *, std::pair<std::shared_ptr<Bo>, size_t>> maps_;  // live mappings
  std::map<uint32_t, unsigned> nr_counts_;
  std::vector<IoctlCall> calls_;
  std::vector<UserptrPin> userptrs_;
  std::vector<HostBlobRequest> host_blobs_;
  std::vector<uint32_t> unrefs_;
  std::vector<std::string> opened_;
  std::vector<std::shared_ptr<Fence>> held_;
  int last_open_flags_ = 0;
  uint32_t next_res_ = 1;
  uint32_t context_capset_ = 0;
  uint32_t context_rings_ = 0;
};

}  // namespace rvgl::guest::test
