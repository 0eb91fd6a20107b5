// Messages for the host's operator, on stderr with a "rocm-virgl:" prefix. Warnings always;
// debug lines only with RVGL_DEBUG=1. Never guest-controlled format strings.
#pragma once

#include "log_limit.h"
#include "virgl_abi.h"

namespace rvgl::hooks {

void log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
// log_warn for a message a guest can repeat at will: through `limit` (one per call site).
void log_warn_limited(LogLimit &limit, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
bool debug_enabled();
// Reads RVGL_DEBUG again (each fresh virgl_renderer_init does).
void refresh_debug_from_env();

// The VMM's log callback (virgl_set_log_callback, 1.x). With free_user_data null the real library
// owns user_data and we only borrow it until the VMM replaces the callback; otherwise we own it
// and release the previous one on replacement, as the real library does.
void set_vmm_log_callback(rvgl_virgl_log_callback cb, void *user_data,
                          rvgl_virgl_free_data_callback free_user_data);
// virglrenderer's VIRGL_LOG_LEVEL_WARNING (src/virglrenderer.h, enum virgl_log_level_flags:
// DEBUG 0, INFO 1, WARNING 2, ERROR 3).
constexpr int kVirglLogLevelWarning = 2;
// A message for both the VMM's log callback (when it set one) and stderr.
void log_vmm(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

}  // namespace rvgl::hooks
