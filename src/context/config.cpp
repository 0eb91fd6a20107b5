#include "context/config.h"

#include <cstdlib>
#include <cstring>

namespace rvgl {

namespace {

template <class T>
void read_number(const char *name, T *out, T scale = 1) {
  const char *v = std::getenv(name);
  if (!v || !*v) return;
  char *end = nullptr;
  unsigned long long n = std::strtoull(v, &end, 0);
  if (*end == '\0') *out = static_cast<T>(n) * scale;
}

}  // namespace

Config Config::from_env() {
  Config c;
  if (const char *v = std::getenv("RVGL_RENDER_NODE")) c.render_node = v;
  if (const char *v = std::getenv("RVGL_CAPTURE_DIR")) c.capture_dir = v;
  if (const char *v = std::getenv("RVGL_COMPUTE_ONLY")) c.compute_only = std::strcmp(v, "0") != 0;
  read_number("RVGL_CAPTURE_MAX_MB", &c.capture_max_bytes, uint64_t{1} << 20);
  read_number("RVGL_CAPSET_ID", &c.capset_id);
  read_number("RVGL_NUM_XCC", &c.num_xcc_override);
  auto &l = c.limits;
  read_number("RVGL_MAX_OBJECTS", &l.max_objects);
  read_number("RVGL_MAX_VRAM_MB", &l.max_vram_bytes, uint64_t{1} << 20);
  read_number("RVGL_MAX_GTT_MB", &l.max_gtt_bytes, uint64_t{1} << 20);
  read_number("RVGL_MAX_USERPTR_MB", &l.max_userptr_bytes, uint64_t{1} << 20);
  read_number("RVGL_MAX_QUEUES", &l.max_queues);
  read_number("RVGL_MAX_DOORBELL_KB", &l.max_doorbell_bytes, uint64_t{1} << 10);
  read_number("RVGL_MAX_PROCESS_DOORBELL_KB", &l.max_process_doorbell_bytes, uint64_t{1} << 10);
  read_number("RVGL_MAX_VA_MAPPINGS", &l.max_va_mappings);
  l.max_va_bytes = 0;
  read_number("RVGL_MAX_VA_MB", &l.max_va_bytes, uint64_t{1} << 20);
  if (!l.max_va_bytes) {
    // Every byte the context may hold, mapped once (saturating: the quotas may be huge).
    const uint64_t pools[] = {l.max_vram_bytes, l.max_gtt_bytes, l.max_userptr_bytes};
    for (const uint64_t b : pools)
      l.max_va_bytes = b > UINT64_MAX - l.max_va_bytes ? UINT64_MAX : l.max_va_bytes + b;
  }
  read_number("RVGL_MAX_SUBMIT_BYTES", &l.max_submit_bytes);
  read_number("RVGL_MAX_IBS", &l.max_ibs_per_submit);
  read_number("RVGL_MAX_WAITS", &l.max_waits_per_submit);
  if (c.capset_id == 0 || c.capset_id > 0xff) c.capset_id = 8;
  if (l.max_queues > 62) l.max_queues = 62;
  return c;
}

}  // namespace rvgl
