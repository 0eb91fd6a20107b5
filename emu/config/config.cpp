#include "config/config.h"

#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace rvgl::emu {

namespace {

bool parse_u64(std::string_view s, uint64_t &out) {
  int base = 10;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    s.remove_prefix(2);
    base = 16;
  }
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out, base);
  return ec == std::errc() && p == s.data() + s.size();
}

struct ErrnoName {
  const char *name;
  int value;
};

constexpr ErrnoName kErrnos[] = {
    {"EPERM", EPERM},         {"ENOENT", ENOENT},
    {"EINTR", EINTR},         {"EIO", EIO},
    {"ENXIO", ENXIO},         {"EBADF", EBADF},
    {"EAGAIN", EAGAIN},       {"ENOMEM", ENOMEM},
    {"EACCES", EACCES},       {"EFAULT", EFAULT},
    {"EBUSY", EBUSY},         {"EEXIST", EEXIST},
    {"ENODEV", ENODEV},       {"EINVAL", EINVAL},
    {"ENFILE", ENFILE},       {"EMFILE", EMFILE},
    {"ENOTTY", ENOTTY},       {"ENOSPC", ENOSPC},
    {"ENOSYS", ENOSYS},       {"ETIME", ETIME},
    {"ETIMEDOUT", ETIMEDOUT}, {"ECANCELED", ECANCELED},
    {"EDEADLK", EDEADLK},     {"EOPNOTSUPP", EOPNOTSUPP},
    {"ERANGE", ERANGE},       {"E2BIG", E2BIG},
};

bool parse_errno(std::string_view s, int &out) {
  for (const auto &e : kErrnos)
    if (s == e.name) {
      out = e.value;
      return true;
    }
  uint64_t v;
  if (parse_u64(s, v) && v > 0 && v < 4096) {
    out = static_cast<int>(v);
    return true;
  }
  return false;
}

// "NAME:N[+]:ERRNO[,NAME:N:ERRNO...]"
bool parse_fail_rules(std::string_view s, std::vector<FailRule> &out) {
  std::vector<FailRule> rules;
  while (!s.empty()) {
    const size_t comma = s.find(',');
    std::string_view item = s.substr(0, comma);
    s = comma == std::string_view::npos ? std::string_view() : s.substr(comma + 1);
    if (item.empty()) continue;
    const size_t c1 = item.find(':');
    if (c1 == std::string_view::npos) return false;
    const size_t c2 = item.find(':', c1 + 1);
    if (c2 == std::string_view::npos) return false;
    FailRule r;
    r.name = std::string(item.substr(0, c1));
    std::string_view nth = item.substr(c1 + 1, c2 - c1 - 1);
    if (!nth.empty() && nth.back() == '+') {
      r.and_after = true;
      nth.remove_suffix(1);
    }
    if (!parse_u64(nth, r.nth) || r.nth == 0) return false;
    if (!parse_errno(item.substr(c2 + 1), r.err)) return false;
    for (auto &ch : r.name)
      ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    rules.push_back(std::move(r));
  }
  out = std::move(rules);
  return true;
}

bool parse_bool(std::string_view s, bool &out) {
  if (s == "1" || s == "true" || s == "yes" || s == "on") {
    out = true;
    return true;
  }
  if (s == "0" || s == "false" || s == "no" || s == "off" || s.empty()) {
    out = false;
    return true;
  }
  return false;
}

struct U64Knob {
  const char *name;
  uint64_t Config::*field;
  uint64_t scale;  // value is multiplied (MiB knobs)
  uint64_t min, max;
};

constexpr U64Knob kU64Knobs[] = {
    {"RVGL_EMU_VRAM_MB", &Config::vram_bytes, 1ull << 20, 16, 1ull << 24},
    {"RVGL_EMU_GTT_MB", &Config::gtt_bytes, 1ull << 20, 16, 1ull << 24},
    {"RVGL_EMU_JOB_LATENCY_US", &Config::job_latency_us, 1, 0, 10'000'000},
    {"RVGL_EMU_IRQ_LATENCY_US", &Config::irq_latency_us, 1, 0, 10'000'000},
    {"RVGL_EMU_LOCKUP_TIMEOUT_MS", &Config::lockup_timeout_ms, 1, 1, 3'600'000},
    {"RVGL_EMU_USERQ_POLL_US", &Config::userq_poll_us, 1, 1, 1'000'000},
    {"RVGL_EMU_VM_UPDATE_US", &Config::vm_update_us, 1, 0, 10'000'000},
    {"RVGL_EMU_SPM_RATE_HZ", &Config::spm_rate_hz, 1, 1, 10'000'000},
    {"RVGL_EMU_SPM_RING_KB", &Config::spm_ring_bytes, 1024, 1, 1u << 20},
    {"RVGL_EMU_COUNTERS_INTERVAL_MS", &Config::counters_interval_ms, 1, 0, 3'600'000},
    {"RVGL_EMU_TRACE", &Config::trace, 1, 0, 2},
    {"RVGL_EMU_HANG_JOB", &Config::hang_job, 1, 0, UINT64_MAX},
    {"RVGL_EMU_SOFT_RECOVER_JOB", &Config::soft_recover_job, 1, 0, UINT64_MAX},
    {"RVGL_EMU_RING_RESET_JOB", &Config::ring_reset_job, 1, 0, UINT64_MAX},
    {"RVGL_EMU_RECOVERY_COUNT_DELAY_US", &Config::recovery_count_delay_us, 1, 0, 10'000'000},
    {"RVGL_EMU_RECOVERY_COUNT_AT_QUERY", &Config::recovery_count_at_query, 1, 0, 1},
    {"RVGL_EMU_FULL_RESET_US", &Config::full_reset_us, 1, 0, 10'000'000},
    {"RVGL_EMU_FAULT_HALT_MS", &Config::fault_halt_ms, 1, 0, 600'000},
    {"RVGL_EMU_RESET_JOB", &Config::reset_job, 1, 0, UINT64_MAX},
    {"RVGL_EMU_UDMABUF_SIZE_LIMIT_MB", &Config::udmabuf_size_limit_mb, 1, 1, 1ull << 20},
    {"RVGL_EMU_UDMABUF_PAGE_NS", &Config::udmabuf_page_ns, 1, 0, 1'000'000},
    {"RVGL_EMU_VM_FAULT_STOP", &Config::vm_fault_stop, 1, 0, 2},
    {"RVGL_EMU_ENTITY_ERRORS", &Config::entity_errors, 1, 0, 1},
};

constexpr const char *kStructural[] = {
    "RVGL_EMU_PROFILE", "RVGL_EMU_DEVICES",   "RVGL_EMU_XCCS",      "RVGL_EMU_VRAM_MB",
    "RVGL_EMU_GTT_MB",  "RVGL_EMU_DRM_MINOR", "RVGL_EMU_STATE_DIR",
};

constexpr const char *kAllKnobs[] = {
    "RVGL_EMU_TRACE",
    "RVGL_EMU_PROFILE",
    "RVGL_EMU_DEVICES",
    "RVGL_EMU_XCCS",
    "RVGL_EMU_VRAM_MB",
    "RVGL_EMU_GTT_MB",
    "RVGL_EMU_DRM_MINOR",
    "RVGL_EMU_STATE_DIR",
    "RVGL_EMU_JOB_LATENCY_US",
    "RVGL_EMU_IRQ_LATENCY_US",
    "RVGL_EMU_LOCKUP_TIMEOUT_MS",
    "RVGL_EMU_USERQ_POLL_US",
    "RVGL_EMU_SPM_RATE_HZ",
    "RVGL_EMU_SPM_RING_KB",
    "RVGL_EMU_COUNTERS_INTERVAL_MS",
    "RVGL_EMU_VRAM_POISON",
    "RVGL_EMU_FAIL",
    "RVGL_EMU_HANG_JOB",
    "RVGL_EMU_SOFT_RECOVER_JOB",
    "RVGL_EMU_RING_RESET_JOB",
    "RVGL_EMU_RECOVERY_COUNT_DELAY_US",
    "RVGL_EMU_RECOVERY_COUNT_AT_QUERY",
    "RVGL_EMU_FULL_RESET_US",
    "RVGL_EMU_FAULT_HALT_MS",
    "RVGL_EMU_RESET_JOB",
    "RVGL_EMU_RESET_VRAM_LOST",
    "RVGL_EMU_FAULT_VA",
    "RVGL_EMU_UDMABUF_LIST_LIMIT",
    "RVGL_EMU_UDMABUF_SIZE_LIMIT_MB",
    "RVGL_EMU_UDMABUF_PAGE_NS",
    "RVGL_EMU_VM_FAULT_STOP",
    "RVGL_EMU_ENTITY_ERRORS",
    "RVGL_EMU_NO_SYNCOBJ_EVENTFD",
};

}  // namespace

std::string default_state_dir() {
  const char *tmp = std::getenv("TMPDIR");
  std::string base = (tmp && *tmp == '/') ? tmp : "/tmp";
  while (base.size() > 1 && base.back() == '/')
    base.pop_back();
  return base + "/rvgl-emu-" + std::to_string(static_cast<unsigned long>(getuid()));
}

bool knob_is_structural(std::string_view name) {
  for (const char *k : kStructural)
    if (name == k) return true;
  return false;
}

int apply_knob(Config &cfg, std::string_view name, std::string_view value) {
  for (const auto &k : kU64Knobs) {
    if (name != k.name) continue;
    uint64_t v;
    if (!parse_u64(value, v) || v < k.min || v > k.max) return -EINVAL;
    cfg.*k.field = v * k.scale;
    return 0;
  }
  if (name == "RVGL_EMU_PROFILE") {
    const DeviceProfile *p = find_profile(value);
    if (!p) return -EINVAL;
    cfg.profile = p;
    return 0;
  }
  if (name == "RVGL_EMU_DEVICES") {
    uint64_t v;
    if (!parse_u64(value, v) || v < 1 || v > 16) return -EINVAL;
    cfg.devices = static_cast<uint32_t>(v);
    return 0;
  }
  if (name == "RVGL_EMU_XCCS") {
    uint64_t v;
    if (!parse_u64(value, v) || v > 16) return -EINVAL;  // 0: profile default
    cfg.xccs = static_cast<uint32_t>(v);
    return 0;
  }
  if (name == "RVGL_EMU_DRM_MINOR") {
    uint64_t v;
    if (!parse_u64(value, v) || v > 1000) return -EINVAL;
    cfg.drm_minor = static_cast<uint32_t>(v);
    return 0;
  }
  if (name == "RVGL_EMU_UDMABUF_LIST_LIMIT") {
    uint64_t v;
    if (!parse_u64(value, v) || v < 1 || v > (1u << 20)) return -EINVAL;
    cfg.udmabuf_list_limit = static_cast<uint32_t>(v);
    return 0;
  }
  if (name == "RVGL_EMU_STATE_DIR") {
    if (value.empty() || value[0] != '/') return -EINVAL;
    cfg.state_dir = std::string(value);
    return 0;
  }
  if (name == "RVGL_EMU_VRAM_POISON") return parse_bool(value, cfg.vram_poison) ? 0 : -EINVAL;
  if (name == "RVGL_EMU_NO_SYNCOBJ_EVENTFD")
    return parse_bool(value, cfg.no_syncobj_eventfd) ? 0 : -EINVAL;
  if (name == "RVGL_EMU_RESET_VRAM_LOST")
    return parse_bool(value, cfg.reset_vram_lost) ? 0 : -EINVAL;
  if (name == "RVGL_EMU_FAIL") return parse_fail_rules(value, cfg.fail) ? 0 : -EINVAL;
  if (name == "RVGL_EMU_FAULT_VA") {
    // "ADDR[:LEN]", LEN defaults to one GPU page.
    uint64_t addr = 0, len = 4096;
    const size_t colon = value.find(':');
    if (value.empty()) {
      cfg.fault_va = cfg.fault_len = 0;
      return 0;
    }
    if (!parse_u64(value.substr(0, colon), addr)) return -EINVAL;
    if (colon != std::string_view::npos && (!parse_u64(value.substr(colon + 1), len) || !len))
      return -EINVAL;
    cfg.fault_va = addr;
    cfg.fault_len = len;
    return 0;
  }
  return -ENOENT;
}

Config config_from_environment() {
  Config cfg;
  cfg.profile = find_profile("gfx1100");
  cfg.state_dir = default_state_dir();
  for (const char *name : kAllKnobs) {
    const char *v = std::getenv(name);
    if (!v) continue;
    if (apply_knob(cfg, name, v) != 0) {
      char msg[256];
      const int n =
          std::snprintf(msg, sizeof(msg), "rvgl-emu: ignoring %s=%s (invalid)\n", name, v);
      if (n > 0) (void)!::write(2, msg, static_cast<size_t>(std::min(n, 255)));
    }
  }
  return cfg;
}

}  // namespace rvgl::emu
