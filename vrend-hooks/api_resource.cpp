// Exported resource functions of the virglrenderer C API. Ids of ours are answered from our
// table (RocmResource); every other id goes to the real library unchanged.
#include <drm_fourcc.h>

#include <cerrno>
#include <cstring>

#include "api_guard.h"
#include "real_library.h"
#include "router.h"

using rvgl::hooks::guarded;
using rvgl::hooks::guarded_void;
using rvgl::hooks::RocmResource;
using rvgl::hooks::Router;

namespace {

// Fields of virgl_renderer_resource_info an untyped (blob) resource has: its handle, and from
// 1.0 on its fd; the rest reads 0.
void fill_info(const RocmResource &r, uint32_t res_id, virgl_renderer_resource_info *info,
               bool has_fd_field) {
  std::memset(info, 0, sizeof(*info));
  info->handle = res_id;
  if (has_fd_field) reinterpret_cast<rvgl_virgl_resource_info_v1 *>(info)->fd = r.fd();
}

}  // namespace

extern "C" {

int virgl_renderer_resource_create(struct virgl_renderer_resource_create_args *args,
                                   struct iovec *iov, uint32_t num_iovs) {
  return guarded(__func__, ENOMEM, [&] {
    if (!args) return EINVAL;
    auto real = RVGL_REAL(virgl_renderer_resource_create);
    return Router::get().real_resource_create(
        args->handle, EINVAL, [&] { return real ? real(args, iov, num_iovs) : EINVAL; });
  });
}

int virgl_renderer_resource_import_eglimage(struct virgl_renderer_resource_create_args *args,
                                            void *image) {
  return guarded(__func__, ENOMEM, [&] {
    if (!args) return EINVAL;
    auto real = RVGL_REAL(virgl_renderer_resource_import_eglimage);
    return Router::get().real_resource_create(args->handle, EINVAL,
                                              [&] { return real ? real(args, image) : EINVAL; });
  });
}

int virgl_renderer_resource_import_blob(
    const struct virgl_renderer_resource_import_blob_args *args) {
  return guarded(__func__, -ENOMEM, [&] {
    if (!args) return -EINVAL;
    auto real = RVGL_REAL(virgl_renderer_resource_import_blob);
    return Router::get().real_resource_create(args->res_handle, -EINVAL,
                                              [&] { return real ? real(args) : -ENOSYS; });
  });
}

int virgl_renderer_resource_create_blob(
    const struct virgl_renderer_resource_create_blob_args *args) {
  return guarded(__func__, -ENOMEM, [&] { return Router::get().resource_create_blob(args); });
}

void virgl_renderer_resource_unref(uint32_t res_handle) {
  guarded_void(__func__, [&] { Router::get().resource_unref(res_handle); });
}

void virgl_renderer_resource_set_priv(uint32_t res_handle, void *priv) {
  guarded_void(__func__, [&] {
    if (Router::get().with_resource(res_handle, [&](RocmResource &r) { r.set_priv(priv); })) return;
    if (auto real = RVGL_REAL(virgl_renderer_resource_set_priv)) real(res_handle, priv);
  });
}

void *virgl_renderer_resource_get_priv(uint32_t res_handle) {
  return guarded(__func__, static_cast<void *>(nullptr), [&]() -> void * {
    void *priv = nullptr;
    if (Router::get().with_resource(res_handle, [&](RocmResource &r) { priv = r.priv(); }))
      return priv;
    if (auto real = RVGL_REAL(virgl_renderer_resource_get_priv)) return real(res_handle);
    return nullptr;
  });
}

int virgl_renderer_transfer_read_iov(uint32_t handle, uint32_t ctx_id, uint32_t level,
                                     uint32_t stride, uint32_t layer_stride, struct virgl_box *box,
                                     uint64_t offset, struct iovec *iov, int iovec_cnt) {
  return guarded(__func__, ENOMEM, [&] {
    // Our blobs are shared memory: there is nothing to transfer, and our contexts take none.
    auto &r = Router::get();
    if (r.owns_resource(handle) || r.owns_context(ctx_id)) return EINVAL;
    if (auto real = RVGL_REAL(virgl_renderer_transfer_read_iov))
      return real(handle, ctx_id, level, stride, layer_stride, box, offset, iov, iovec_cnt);
    return EINVAL;
  });
}

int virgl_renderer_transfer_write_iov(uint32_t handle, uint32_t ctx_id, int level, uint32_t stride,
                                      uint32_t layer_stride, struct virgl_box *box, uint64_t offset,
                                      struct iovec *iovec, unsigned int iovec_cnt) {
  return guarded(__func__, ENOMEM, [&] {
    auto &r = Router::get();
    if (r.owns_resource(handle) || r.owns_context(ctx_id)) return EINVAL;
    if (auto real = RVGL_REAL(virgl_renderer_transfer_write_iov))
      return real(handle, ctx_id, level, stride, layer_stride, box, offset, iovec, iovec_cnt);
    return EINVAL;
  });
}

int virgl_renderer_resource_attach_iov(int res_handle, struct iovec *iov, int num_iovs) {
  return guarded(__func__, ENOMEM, [&] {
    // Guest pages of our blobs arrive with the blob (userptr) and are fixed for its life.
    if (Router::get().owns_resource(static_cast<uint32_t>(res_handle))) return EINVAL;
    if (auto real = RVGL_REAL(virgl_renderer_resource_attach_iov))
      return real(res_handle, iov, num_iovs);
    return EINVAL;
  });
}

void virgl_renderer_resource_detach_iov(int res_handle, struct iovec **iov_p, int *num_iovs_p) {
  guarded_void(__func__, [&] {
    if (Router::get().resource_detach_iov(static_cast<uint32_t>(res_handle), iov_p, num_iovs_p))
      return;
    if (auto real = RVGL_REAL(virgl_renderer_resource_detach_iov))
      real(res_handle, iov_p, num_iovs_p);
  });
}

int virgl_renderer_resource_get_info(int res_handle, struct virgl_renderer_resource_info *info) {
  return guarded(__func__, ENOMEM, [&] {
    const uint32_t id = static_cast<uint32_t>(res_handle);
    const bool has_fd_field = rvgl::hooks::real_has_v1_abi();
    bool null_info = false;
    if (Router::get().with_resource(id, [&](RocmResource &r) {
          if (info) fill_info(r, id, info, has_fd_field);
          null_info = !info;
        }))
      return null_info ? EINVAL : 0;
    if (auto real = RVGL_REAL(virgl_renderer_resource_get_info)) return real(res_handle, info);
    return EINVAL;
  });
}

int virgl_renderer_resource_get_info_ext(int res_handle,
                                         struct rvgl_virgl_resource_info_ext_v1 *info) {
  return guarded(__func__, ENOMEM, [&] {
    const uint32_t id = static_cast<uint32_t>(res_handle);
    bool null_info = false;
    if (Router::get().with_resource(id, [&](RocmResource &r) {
          null_info = !info;
          if (!info) return;
          std::memset(info, 0, sizeof(*info));
          info->version = RVGL_VIRGL_RESOURCE_INFO_EXT_VERSION;
          fill_info(r, id, reinterpret_cast<virgl_renderer_resource_info *>(&info->base), true);
          info->has_dmabuf_export = r.is_dmabuf();
        }))
      return null_info ? EINVAL : 0;
    if (auto real = RVGL_REAL(virgl_renderer_resource_get_info_ext)) return real(res_handle, info);
    return ENOSYS;
  });
}

int virgl_renderer_resource_map(uint32_t res_handle, void **map, uint64_t *out_size) {
  return guarded(__func__, -ENOMEM, [&] {
    int ret = -EINVAL;
    if (Router::get().with_resource(res_handle, [&](RocmResource &r) {
          if (map && out_size) ret = r.map(map, out_size);
        }))
      return ret;
    if (auto real = RVGL_REAL(virgl_renderer_resource_map)) return real(res_handle, map, out_size);
    return -ENOSYS;
  });
}

int virgl_renderer_resource_unmap(uint32_t res_handle) {
  return guarded(__func__, -ENOMEM, [&] {
    int ret = -EINVAL;
    if (Router::get().with_resource(res_handle, [&](RocmResource &r) { ret = r.unmap(); }))
      return ret;
    if (auto real = RVGL_REAL(virgl_renderer_resource_unmap)) return real(res_handle);
    return -ENOSYS;
  });
}

int virgl_renderer_resource_map_fixed(uint32_t res_handle, void *addr) {
  return guarded(__func__, -ENOMEM, [&] {
    int ret = -EINVAL;
    if (Router::get().with_resource(res_handle, [&](RocmResource &r) { ret = r.map_fixed(addr); }))
      return ret;
    if (auto real = RVGL_REAL(virgl_renderer_resource_map_fixed)) return real(res_handle, addr);
    return -ENOSYS;
  });
}

int virgl_renderer_resource_get_map_info(uint32_t res_handle, uint32_t *map_info) {
  return guarded(__func__, -ENOMEM, [&] {
    int ret = -EINVAL;
    if (Router::get().with_resource(res_handle, [&](RocmResource &r) {
          const uint32_t info = r.map_info();
          if (map_info && (info & VIRGL_RENDERER_MAP_CACHE_MASK) != VIRGL_RENDERER_MAP_CACHE_NONE) {
            *map_info = info;
            ret = 0;
          }
        }))
      return ret;
    if (auto real = RVGL_REAL(virgl_renderer_resource_get_map_info))
      return real(res_handle, map_info);
    return -ENOSYS;
  });
}

int virgl_renderer_resource_export_blob(uint32_t res_id, uint32_t *fd_type, int *fd) {
  return guarded(__func__, ENOMEM, [&] {
    int ret = EINVAL;  // positive, like the real function
    if (Router::get().with_resource(res_id, [&](RocmResource &r) {
          rvgl::UniqueFd d;
          if (!fd_type || !fd || r.dup_fd(&d) != 0) return;
          *fd_type = r.fd_type();
          *fd = d.release();
          ret = 0;
        }))
      return ret;
    if (auto real = RVGL_REAL(virgl_renderer_resource_export_blob))
      return real(res_id, fd_type, fd);
    return ENOSYS;
  });
}

void *virgl_renderer_get_cursor_data(uint32_t resource_id, uint32_t *width, uint32_t *height) {
  return guarded(__func__, static_cast<void *>(nullptr), [&]() -> void * {
    if (Router::get().owns_resource(resource_id)) return nullptr;  // not an image
    if (auto real = RVGL_REAL(virgl_renderer_get_cursor_data))
      return real(resource_id, width, height);
    return nullptr;
  });
}

void virgl_renderer_get_rect(int resource_id, struct iovec *iov, unsigned int num_iovs,
                             uint32_t offset, int x, int y, int width, int height) {
  guarded_void(__func__, [&] {
    if (Router::get().owns_resource(static_cast<uint32_t>(resource_id))) return;
    if (auto real = RVGL_REAL(virgl_renderer_get_rect))
      real(resource_id, iov, num_iovs, offset, x, y, width, height);
  });
}

int virgl_renderer_execute(void *execute_args, uint32_t execute_size) {
  return guarded(__func__, -ENOMEM, [&] {
    // An export query on one of our blobs gets the real library's answer for untyped resources:
    // one plane of unknown format; exporting fds this way is refused (export_blob does it).
    if (execute_args && execute_size == sizeof(virgl_renderer_export_query)) {
      auto *q = static_cast<virgl_renderer_export_query *>(execute_args);
      if (q->hdr.stype == VIRGL_RENDERER_STRUCTURE_TYPE_EXPORT_QUERY && q->hdr.stype_version == 0 &&
          q->hdr.size == sizeof(*q) && Router::get().owns_resource(q->in_resource_id)) {
        if (q->in_export_fds) return -EINVAL;
        q->out_num_fds = 1;
        q->out_fourcc = 0;
        q->out_fds[0] = -1;
        q->out_strides[0] = 0;
        q->out_offsets[0] = 0;
        q->out_modifier = DRM_FORMAT_MOD_INVALID;
        return 0;
      }
    }
    if (auto real = RVGL_REAL(virgl_renderer_execute)) return real(execute_args, execute_size);
    return -EINVAL;
  });
}

}  // extern "C"
