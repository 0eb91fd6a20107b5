#include "log.h"

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace rvgl::hooks {

namespace {

void vlog(const char *fmt, va_list ap) {
  char line[512];
  vsnprintf(line, sizeof(line), fmt, ap);
  // One write per line so lines of concurrent threads do not interleave.
  std::fprintf(stderr, "rocm-virgl: %s\n", line);
}

bool debug_enabled() {
  static const bool on = [] {
    const char *v = std::getenv("RVGL_DEBUG");
    return v && *v && std::strcmp(v, "0") != 0;
  }();
  return on;
}

}  // namespace

void log_warn(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vlog(fmt, ap);
  va_end(ap);
}

void log_debug(const char *fmt, ...) {
  if (!debug_enabled()) return;
  va_list ap;
  va_start(ap, fmt);
  vlog(fmt, ap);
  va_end(ap);
}

}  // namespace rvgl::hooks
