// A virtio-gpu resource created by one of our contexts, as the VMM sees it: the fd the blob was
// exported as (kept for the resource's life, like the real library keeps its resources' fds),
// its map-cache info, the VMM's mapping of it and its private pointer. The memory itself belongs
// to the context (and to the fd); this is the VMM-facing half.
#pragma once

#include <sys/uio.h>

#include <cstdint>
#include <memory>
#include <utility>

#include "context/compute_context.h"
#include "util/mapping.h"
#include "util/unique_fd.h"
#include "virgl_api.h"

namespace rvgl::hooks {

class RocmResource {
 public:
  RocmResource(uint32_t owner_ctx, uint32_t blob_mem, uint64_t size, BlobExport exp)
      : owner_ctx_(owner_ctx),
        blob_mem_(blob_mem),
        size_(size),
        fd_(std::move(exp.fd)),
        fd_type_(exp.fd_type),
        map_info_(exp.map_info),
        charge_(std::move(exp.charge)) {}

  uint32_t owner_ctx() const { return owner_ctx_; }
  uint32_t blob_mem() const { return blob_mem_; }
  uint64_t size() const { return size_; }
  int fd() const { return fd_.get(); }  // borrowed; -1 for userptr blobs (the VMM has the pages)
  uint32_t fd_type() const { return fd_type_; }
  uint32_t map_info() const { return map_info_; }
  bool is_dmabuf() const { return fd_ && fd_type_ == VIRGL_RENDERER_BLOB_FD_TYPE_DMABUF; }
  // The making context's charge for the memory (ContextMemory::attach_foreign).
  std::shared_ptr<const void> charge() const { return charge_; }

  void *priv() const { return priv_; }
  void set_priv(void *p) { priv_ = p; }

  // The VMM's iovecs of a blob with guest storage (its own array, never ours to free), handed
  // back once by detach_iov, as the real library does; null after that or for host blobs.
  void set_vmm_iov(const iovec *iov, int count) {
    vmm_iov_ = iov;
    vmm_iov_count_ = count;
  }
  std::pair<const iovec *, int> take_vmm_iov() {
    return {std::exchange(vmm_iov_, nullptr), std::exchange(vmm_iov_count_, 0)};
  }

  // A new fd on the same memory for the caller to own; -errno on failure.
  int dup_fd(UniqueFd *out) const;

  // virgl_renderer_resource_map / unmap / map_fixed: 0 or a negative errno.
  int map(void **addr, uint64_t *size);
  int unmap();
  int map_fixed(void *addr) const;

 private:
  bool mappable_fd() const {
    return fd_ && (fd_type_ == VIRGL_RENDERER_BLOB_FD_TYPE_DMABUF ||
                   fd_type_ == VIRGL_RENDERER_BLOB_FD_TYPE_SHM);
  }

  uint32_t owner_ctx_;
  uint32_t blob_mem_;
  uint64_t size_;
  UniqueFd fd_;
  uint32_t fd_type_;
  uint32_t map_info_;
  Mapping mapping_;
  void *priv_ = nullptr;
  const iovec *vmm_iov_ = nullptr;
  int vmm_iov_count_ = 0;
  // The memory behind fd_ stays charged to the context that made it until this resource goes,
  // whatever the context lets go of first (and after it is destroyed).
  std::shared_ptr<const void> charge_;
};

}  // namespace rvgl::hooks
