// Resources: blobs of our contexts, and the id bookkeeping shared with the real library.
#include <cerrno>
#include <new>

#include "log.h"
#include "process_limits.h"
#include "real_library.h"
#include "router.h"

namespace rvgl::hooks {

bool Router::owns_resource(uint32_t res_id) {
  std::lock_guard lk(mu_);
  return resources_.count(res_id) != 0;
}

int Router::resource_create_blob(const virgl_renderer_resource_create_blob_args *args) {
  if (!args) return -EINVAL;
  auto c = our_context(args->ctx_id);
  const bool userptr = args->blob_flags & (RVGL_BLOB_FLAG_USERPTR | RVGL_BLOB_FLAG_USERPTR_RDONLY);
  // Host blobs of our contexts are ours. So are userptr GUEST blobs: the real library would make
  // them plain guest-memory resources and never tell the context; we make them GPU-visible. A
  // GUEST blob without the userptr flag stays the real library's plain resource.
  const bool ours = c && (args->blob_mem == VIRGL_RENDERER_BLOB_MEM_HOST3D ||
                          args->blob_mem == VIRGL_RENDERER_BLOB_MEM_HOST3D_GUEST ||
                          (args->blob_mem == VIRGL_RENDERER_BLOB_MEM_GUEST && userptr));
  if (!ours) {
    auto real = RVGL_REAL(virgl_renderer_resource_create_blob);
    return real_resource_create(args->res_handle, -EINVAL,
                                [&] { return real ? real(args) : -ENOSYS; });
  }

  // The real library's checks, in its order and with its answers.
  if (args->res_handle == 0 || args->size == 0) return -EINVAL;
  const bool guest_storage = args->blob_mem != VIRGL_RENDERER_BLOB_MEM_HOST3D;
  if (guest_storage ? (args->num_iovs == 0 || !args->iovecs) : args->num_iovs != 0) return -EINVAL;
  {
    std::lock_guard lk(mu_);
    if (resources_.count(args->res_handle) || real_.has_resource(args->res_handle)) return -EINVAL;
  }

  // A host blob keeps an fd for its life (as the real library's do): never one the VMM needs.
  if (!guest_storage && !descriptor_left_for_us()) {
    static LogLimit limit;
    log_warn_limited(limit,
                     "blob %u refused (-EMFILE): the file descriptors left to this VMM process "
                     "(RLIMIT_NOFILE) are its reserve",
                     args->res_handle);
    return -EMFILE;
  }

  BlobArgs ba;
  ba.res_id = args->res_handle;
  ba.blob_mem = args->blob_mem;
  ba.blob_flags = args->blob_flags;
  ba.blob_id = args->blob_id;
  ba.size = args->size;
  if (guest_storage) ba.iov = {args->iovecs, args->num_iovs};
  // The table's entry is made first: once the context has made the blob, filing it allocates
  // nothing. Refused later, the blob would have to be unmade, and a detach does not unmake what
  // the context's making took (its shared page, a claimed blob id off the parked list).
  std::map<uint32_t, RocmResource> spare;
  try {
    spare.emplace(args->res_handle,
                  RocmResource(args->ctx_id, args->blob_mem, args->size, BlobExport()));
  } catch (const std::bad_alloc &) {
    return -ENOMEM;
  }
  auto node = spare.extract(spare.begin());
  BlobExport exp;
  if (int err = c->create_blob(ba, &exp)) return err;
  node.mapped() = RocmResource(args->ctx_id, args->blob_mem, args->size, std::move(exp));
  if (guest_storage) node.mapped().set_vmm_iov(args->iovecs, static_cast<int>(args->num_iovs));
  std::lock_guard lk(mu_);
  resources_.insert(std::move(node));  // the id is free: checked above, and VMM calls are serial
  return 0;
}

void Router::detach_from_all_contexts(uint32_t res_id) {
  for_each_context(
      [res_id](const std::shared_ptr<ComputeContext> &c) { c->detach_resource(res_id); });
}

bool Router::resource_detach_iov(uint32_t res_id, iovec **iov_p, int *num_iovs_p) {
  std::pair<const iovec *, int> iov{nullptr, 0};
  {
    std::lock_guard lk(mu_);
    auto it = resources_.find(res_id);
    if (it == resources_.end()) return false;
    iov = it->second.take_vmm_iov();
  }
  // QEMU unmaps the iovecs it gets back (virtio_gpu_cleanup_mapping_iov, before it unrefs the
  // resource or on DETACH_BACKING): no context may use those pages once this returns. The blob
  // stays a resource until unref, with no storage: the guest can no longer name it.
  if (iov.first) detach_from_all_contexts(res_id);
  // The VMM's own array: create_blob takes it const, detach_iov gives it back as the VMM's to
  // free, as the real library does.
  if (iov_p) *iov_p = const_cast<iovec *>(iov.first);
  if (num_iovs_p) *num_iovs_p = iov.second;
  return true;
}

void Router::note_real_resource(uint32_t res_id) {
  try {
    std::lock_guard lk(mu_);
    real_.add_resource(res_id);
  } catch (const std::bad_alloc &) {
    if (auto real = RVGL_REAL(virgl_renderer_resource_unref)) real(res_id);
    throw;
  }
}

void Router::resource_unref(uint32_t res_id) {
  std::map<uint32_t, RocmResource>::node_type mine;
  {
    std::lock_guard lk(mu_);
    mine = resources_.extract(res_id);
  }
  // Every context of ours lets go of it: the owner, and any that imported it (ours or the real
  // library's) — as the real library detaches a resource from all its contexts on unref.
  detach_from_all_contexts(res_id);
  if (mine) return;  // unmapped and closed here, after the contexts dropped it
  if (auto real = RVGL_REAL(virgl_renderer_resource_unref)) real(res_id);
  std::lock_guard lk(mu_);
  real_.remove_resource(res_id);
}

}  // namespace rvgl::hooks
