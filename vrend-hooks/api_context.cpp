// Exported context functions of the virglrenderer C API: creation, submission, fences,
// attachment. Routing is by context id (Router). Every body runs guarded (api_guard.h): failure
// is the function's own error value, never an exception.
#include <cerrno>

#include "api_guard.h"
#include "router.h"

using rvgl::hooks::guarded;
using rvgl::hooks::guarded_void;
using rvgl::hooks::Router;

extern "C" {

int virgl_renderer_context_create_with_flags(uint32_t ctx_id, uint32_t ctx_flags, uint32_t nlen,
                                             const char *name) {
  return guarded(__func__, ENOMEM,
                 [&] { return Router::get().context_create(ctx_id, ctx_flags, nlen, name); });
}

int virgl_renderer_context_create(uint32_t handle, uint32_t nlen, const char *name) {
  // A legacy virgl context: always the real library's.
  return guarded(__func__, ENOMEM,
                 [&] { return Router::get().legacy_context_create(handle, nlen, name); });
}

void virgl_renderer_context_destroy(uint32_t handle) {
  guarded_void(__func__, [&] { Router::get().context_destroy(handle); });
}

int virgl_renderer_submit_cmd(void *buffer, int ctx_id, int ndw) {
  return guarded(__func__, ENOMEM, [&] { return Router::get().submit_cmd(buffer, ctx_id, ndw); });
}

int virgl_renderer_submit_cmd2(void *buffer, int ctx_id, int ndw, uint64_t *in_fence_ids,
                               uint32_t num_in_fences) {
  return guarded(__func__, -ENOMEM, [&] {
    return Router::get().submit_cmd2(buffer, ctx_id, ndw, in_fence_ids, num_in_fences);
  });
}

int virgl_renderer_context_create_fence(uint32_t ctx_id, uint32_t flags, uint32_t ring_idx,
                                        uint64_t fence_id) {
  return guarded(__func__, -ENOMEM, [&] {
    return Router::get().context_create_fence(ctx_id, flags, ring_idx, fence_id);
  });
}

void virgl_renderer_context_poll(uint32_t ctx_id) {
  guarded_void(__func__, [&] { Router::get().context_poll(ctx_id); });
}

int virgl_renderer_context_get_poll_fd(uint32_t ctx_id) {
  return guarded(__func__, -1, [&] { return Router::get().context_get_poll_fd(ctx_id); });
}

void virgl_renderer_ctx_attach_resource(int ctx_id, int res_handle) {
  guarded_void(__func__, [&] {
    Router::get().ctx_attach_resource(static_cast<uint32_t>(ctx_id),
                                      static_cast<uint32_t>(res_handle));
  });
}

void virgl_renderer_ctx_detach_resource(int ctx_id, int res_handle) {
  guarded_void(__func__, [&] {
    Router::get().ctx_detach_resource(static_cast<uint32_t>(ctx_id),
                                      static_cast<uint32_t>(res_handle));
  });
}

}  // extern "C"
