// The parts of virglrenderer's C ABI that Debian's 0.10.4 header does not declare: the 1.x
// additions we export and forward, and the 1.x layout of the resource info structs.
//
// Facts from upstream virglrenderer's src/virglrenderer.h at tags 1.0.0 .. 1.3.0: struct
// virgl_renderer_resource_info gained a trailing `int fd` in 1.0.0 (the resource's own fd,
// borrowed, -1 when none); virgl_renderer_resource_get_info_ext, virgl_set_log_callback and
// virgl_renderer_submit_cmd2 appeared in 1.0.0; virgl_renderer_resource_map_fixed in 1.3.0;
// virgl_renderer_export_fence takes a uint64_t fence id from 1.0.0 on.
//
// Our own names are used for the types so this header can sit next to any virglrenderer.h.
#pragma once

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// virgl_renderer_resource_info as of 1.0.0 (0.10.x stops before `fd`).
struct rvgl_virgl_resource_info_v1 {
  uint32_t handle;
  uint32_t virgl_format;
  uint32_t width;
  uint32_t height;
  uint32_t depth;
  uint32_t flags;
  uint32_t tex_id;
  uint32_t stride;
  int drm_fourcc;
  int fd;
};

#define RVGL_VIRGL_RESOURCE_INFO_EXT_VERSION 0

// virgl_renderer_resource_info_ext (1.0.0+).
struct rvgl_virgl_resource_info_ext_v1 {
  int version;
  struct rvgl_virgl_resource_info_v1 base;
  bool has_dmabuf_export;
  int planes;
  uint64_t modifiers;
  void *d3d_tex2d;
};

// virgl_log_level_flags / virgl_log_callback_type / virgl_free_data_callback_type (1.0.0+).
typedef void (*rvgl_virgl_log_callback)(int log_level, const char *message, void *user_data);
typedef void (*rvgl_virgl_free_data_callback)(void *user_data);

__attribute__((visibility("default"))) int virgl_renderer_submit_cmd2(void *buffer, int ctx_id,
                                                                      int ndw,
                                                                      uint64_t *in_fence_ids,
                                                                      uint32_t num_in_fences);
__attribute__((visibility("default"))) int virgl_renderer_resource_get_info_ext(
    int res_handle, struct rvgl_virgl_resource_info_ext_v1 *info);
__attribute__((visibility("default"))) int virgl_renderer_resource_map_fixed(uint32_t res_handle,
                                                                             void *addr);
__attribute__((visibility("default"))) void virgl_set_log_callback(
    rvgl_virgl_log_callback cb, void *user_data, rvgl_virgl_free_data_callback free_user_data_cb);

#ifdef __cplusplus
}
#endif
