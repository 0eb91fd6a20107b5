// Exported renderer-wide functions of the virglrenderer C API.
//
// A function the real library lacks answers with an error in that function's own convention
// (positive errno, negative errno, -1, null) and never aborts. Every function that reaches our
// C++ runs guarded (api_guard.h); the ones that only forward to the real library (a lazily
// resolved dlsym pointer and a C call, neither of which throws) need no guard.
#include <cerrno>

#include "api_guard.h"
#include "log.h"
#include "real_library.h"
#include "router.h"

using rvgl::hooks::guarded;
using rvgl::hooks::guarded_void;
using rvgl::hooks::Router;

extern "C" {

int virgl_renderer_init(void *cookie, int flags, struct virgl_renderer_callbacks *cb) {
  return guarded(__func__, -ENOMEM, [&] { return Router::get().init(cookie, flags, cb); });
}

void virgl_renderer_cleanup(void *cookie) {
  guarded_void(__func__, [&] { Router::get().cleanup(cookie); });
}

void virgl_renderer_reset(void) {
  guarded_void(__func__, [&] { Router::get().reset(); });
}

void virgl_renderer_poll(void) {
  guarded_void(__func__, [&] { Router::get().poll(); });
}

int virgl_renderer_get_poll_fd(void) {
  // The real library's ctx0 (vrend) fd. Ours are per context: virgl_renderer_context_get_poll_fd.
  if (auto real = RVGL_REAL(virgl_renderer_get_poll_fd)) return real();
  return -1;
}

void virgl_renderer_get_cap_set(uint32_t set, uint32_t *max_ver, uint32_t *max_size) {
  guarded_void(__func__, [&] { Router::get().get_cap_set(set, max_ver, max_size); });
}

void virgl_renderer_fill_caps(uint32_t set, uint32_t version, void *caps) {
  guarded_void(__func__, [&] { Router::get().fill_caps(set, version, caps); });
}

int virgl_renderer_create_fence(int client_fence_id, uint32_t ctx_id) {
  return guarded(__func__, ENOMEM,
                 [&] { return Router::get().create_fence(client_fence_id, ctx_id); });
}

void virgl_renderer_force_ctx_0(void) {
  if (auto real = RVGL_REAL(virgl_renderer_force_ctx_0)) real();
}

int virgl_renderer_export_fence(uint32_t client_fence_id, int *fd) {
  // 1.0 widened the id to 64 bits; call the real function with the width it was built for.
  // Ids come from virgl_renderer_create_fence's int, so nothing is lost either way.
  void *p = rvgl::hooks::resolve_real("virgl_renderer_export_fence");
  if (!p) return -ENOSYS;
  if (rvgl::hooks::real_has_v1_abi())
    return reinterpret_cast<int (*)(uint64_t, int *)>(p)(client_fence_id, fd);
  return reinterpret_cast<int (*)(uint32_t, int *)>(p)(client_fence_id, fd);
}

int virgl_renderer_get_fd_for_texture(uint32_t tex_id, int *fd) {
  if (auto real = RVGL_REAL(virgl_renderer_get_fd_for_texture)) return real(tex_id, fd);
  return -1;
}

int virgl_renderer_get_fd_for_texture2(uint32_t tex_id, int *fd, int *stride, int *offset) {
  if (auto real = RVGL_REAL(virgl_renderer_get_fd_for_texture2))
    return real(tex_id, fd, stride, offset);
  return -1;
}

virgl_debug_callback_type virgl_set_debug_callback(virgl_debug_callback_type cb) {
  if (auto real = RVGL_REAL(virgl_set_debug_callback)) return real(cb);
  return nullptr;
}

void virgl_set_log_callback(rvgl_virgl_log_callback cb, void *user_data,
                            rvgl_virgl_free_data_callback free_user_data_cb) {
  rvgl::hooks::guarded_void(__func__, [&] {
    if (auto real = RVGL_REAL(virgl_set_log_callback)) {
      // Our own messages for the VMM go to the same callback, borrowing user_data (the real
      // library owns it and frees it on replacement).
      rvgl::hooks::set_vmm_log_callback(cb, user_data, nullptr);
      return real(cb, user_data, free_user_data_cb);
    }
    // No real function (0.10.x): we keep the callback for our messages and own user_data as the
    // real library would, releasing it when the callback is replaced.
    rvgl::hooks::set_vmm_log_callback(cb, user_data, free_user_data_cb);
  });
}

}  // extern "C"
