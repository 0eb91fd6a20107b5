// Messages for the host's operator, on stderr with a "rocm-virgl:" prefix. Warnings always;
// debug lines only with RVGL_DEBUG=1. Never guest-controlled format strings.
#pragma once

namespace rvgl::hooks {

void log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

}  // namespace rvgl::hooks
