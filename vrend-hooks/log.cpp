#include "log.h"

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <atomic>
#include <mutex>

#include "util/monotonic_clock.h"

namespace rvgl::hooks {

namespace {

void vformat(char (&line)[512], const char *fmt, va_list ap) {
  vsnprintf(line, sizeof(line), fmt, ap);
}

void emit(const char *line) {
  // One write per line so lines of concurrent threads do not interleave.
  std::fprintf(stderr, "rocm-virgl: %s\n", line);
}

void vemit(const char *fmt, va_list ap) {
  char line[512];
  vformat(line, fmt, ap);
  emit(line);
}

bool debug_from_env() {
  const char *v = std::getenv("RVGL_DEBUG");
  return v && *v && std::strcmp(v, "0") != 0;
}

std::atomic<int> g_debug{-1};  // -1: not read yet

std::mutex g_sink_mu;
rvgl_virgl_log_callback g_sink_cb = nullptr;
void *g_sink_data = nullptr;
rvgl_virgl_free_data_callback g_sink_free = nullptr;

}  // namespace

bool debug_enabled() {
  int v = g_debug.load(std::memory_order_relaxed);
  if (v < 0) {
    v = debug_from_env() ? 1 : 0;
    g_debug.store(v, std::memory_order_relaxed);
  }
  return v == 1;
}

void refresh_debug_from_env() {
  g_debug.store(debug_from_env() ? 1 : 0, std::memory_order_relaxed);
}

void log_warn(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vemit(fmt, ap);
  va_end(ap);
}

void log_warn_limited(LogLimit &limit, const char *fmt, ...) {
  uint32_t left_out = 0;
  if (!limit.allow(monotonic_ns(), &left_out)) return;
  if (left_out) {
    char said[96];
    std::snprintf(said, sizeof(said), "%u messages like the next one left out in the last %u s",
                  left_out, static_cast<unsigned>(LogLimit::kIntervalNs / 1'000'000'000));
    emit(said);
  }
  va_list ap;
  va_start(ap, fmt);
  vemit(fmt, ap);
  va_end(ap);
}

void log_debug(const char *fmt, ...) {
  if (!debug_enabled()) return;
  va_list ap;
  va_start(ap, fmt);
  vemit(fmt, ap);
  va_end(ap);
}

void set_vmm_log_callback(rvgl_virgl_log_callback cb, void *user_data,
                          rvgl_virgl_free_data_callback free_user_data) {
  rvgl_virgl_free_data_callback old_free;
  void *old_data;
  {
    std::lock_guard lk(g_sink_mu);
    old_free = g_sink_free;
    old_data = g_sink_data;
    g_sink_cb = cb;
    g_sink_data = user_data;
    g_sink_free = free_user_data;
  }
  if (old_free) old_free(old_data);
}

void log_vmm(int level, const char *fmt, ...) {
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  vformat(line, fmt, ap);
  va_end(ap);
  emit(line);
  std::lock_guard lk(g_sink_mu);
  if (g_sink_cb) {
    // virglrenderer's own messages end with a newline; ours do too on that path.
    char msg[528];
    std::snprintf(msg, sizeof(msg), "rocm-virgl: %s\n", line);
    g_sink_cb(level, msg, g_sink_data);
  }
}

}  // namespace rvgl::hooks
