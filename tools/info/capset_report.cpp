#include "capset_report.h"

#include <fmt/format.h>

#include <array>
#include <cstring>

#include "amdgpu/uapi/amdgpu_drm_ext.h"

namespace rvgl::info {

namespace {

// How a field reads best. The raw number is always in the JSON; this only shapes the text and
// the "decoded" names.
enum class Show { kDec, kHex, kAddress, kBytes, kKhz, kFeatures, kIpMask, kFamily, kSpmVersion };

struct Field {
  const char *name;
  const char *section;
  Show show;
  uint32_t size;  // sizeof the struct member, for the completeness check below
  uint64_t (*get)(const rvgl_capset &);
};

#define RVGL_CAPSET_FIELD(section, member, show)                  \
  Field {                                                         \
#member, section, show, sizeof(rvgl_capset::member),          \
        [](const rvgl_capset &c) -> uint64_t { return c.member; } \
  }

constexpr const char *kProtocol = "Protocol";
constexpr const char *kLimits = "Host limits";
constexpr const char *kDevice = "Device";
constexpr const char *kMemory = "Memory";
constexpr const char *kVa = "GPU virtual address space";
constexpr const char *kQueues = "Queues";
constexpr const char *kSpm = "Profiling (SPM)";

// Struct order: the text and JSON list fields the way PROTOCOL.md and the header do.
constexpr std::array kFields = {
    RVGL_CAPSET_FIELD(kProtocol, wire_format_version, Show::kDec),
    RVGL_CAPSET_FIELD(kProtocol, protocol_major, Show::kDec),
    RVGL_CAPSET_FIELD(kProtocol, protocol_minor, Show::kDec),
    RVGL_CAPSET_FIELD(kProtocol, features, Show::kFeatures),
    RVGL_CAPSET_FIELD(kLimits, shmem_size, Show::kBytes),
    RVGL_CAPSET_FIELD(kLimits, max_submit_bytes, Show::kBytes),
    RVGL_CAPSET_FIELD(kLimits, max_ibs_per_submit, Show::kDec),
    RVGL_CAPSET_FIELD(kLimits, max_waits_per_submit, Show::kDec),
    RVGL_CAPSET_FIELD(kDevice, pci_vendor_id, Show::kHex),
    RVGL_CAPSET_FIELD(kDevice, pci_device_id, Show::kHex),
    RVGL_CAPSET_FIELD(kDevice, pci_revision_id, Show::kHex),
    RVGL_CAPSET_FIELD(kDevice, family, Show::kFamily),
    RVGL_CAPSET_FIELD(kDevice, chip_external_rev, Show::kHex),
    RVGL_CAPSET_FIELD(kDevice, gfx_ip_major, Show::kDec),
    RVGL_CAPSET_FIELD(kDevice, gfx_ip_minor, Show::kDec),
    RVGL_CAPSET_FIELD(kDevice, gfx_ip_stepping, Show::kDec),
    RVGL_CAPSET_FIELD(kDevice, num_cu, Show::kDec),
    RVGL_CAPSET_FIELD(kDevice, num_shader_engines, Show::kDec),
    RVGL_CAPSET_FIELD(kDevice, wave_size, Show::kDec),
    RVGL_CAPSET_FIELD(kDevice, gpu_counter_freq_khz, Show::kKhz),
    RVGL_CAPSET_FIELD(kDevice, max_engine_clock_khz, Show::kKhz),
    RVGL_CAPSET_FIELD(kSpm, num_xcp, Show::kDec),
    RVGL_CAPSET_FIELD(kSpm, num_xcc, Show::kDec),
    RVGL_CAPSET_FIELD(kQueues, kernel_queue_ip_mask, Show::kIpMask),
    RVGL_CAPSET_FIELD(kQueues, user_queue_ip_mask, Show::kIpMask),
    RVGL_CAPSET_FIELD(kSpm, spm_version, Show::kSpmVersion),
    RVGL_CAPSET_FIELD(kMemory, vram_size, Show::kBytes),
    RVGL_CAPSET_FIELD(kMemory, visible_vram_size, Show::kBytes),
    RVGL_CAPSET_FIELD(kMemory, gtt_size, Show::kBytes),
    RVGL_CAPSET_FIELD(kVa, va_start, Show::kAddress),
    RVGL_CAPSET_FIELD(kVa, va_end, Show::kAddress),
    RVGL_CAPSET_FIELD(kVa, va_alignment, Show::kBytes),
    RVGL_CAPSET_FIELD(kQueues, num_compute_rings, Show::kDec),
    RVGL_CAPSET_FIELD(kQueues, num_sdma_rings, Show::kDec),
    RVGL_CAPSET_FIELD(kQueues, userq_eop_size, Show::kBytes),
    RVGL_CAPSET_FIELD(kQueues, userq_eop_alignment, Show::kBytes),
    RVGL_CAPSET_FIELD(kQueues, userq_sdma_csa_size, Show::kBytes),
    RVGL_CAPSET_FIELD(kQueues, userq_sdma_csa_alignment, Show::kBytes),
};
#undef RVGL_CAPSET_FIELD

// The table plus the members shown separately (marketing_name, pad0, reserved) must cover the
// struct: a field added to the protocol header without a row here breaks the build.
constexpr uint32_t table_bytes() {
  uint32_t n = 0;
  for (const auto &f : kFields)
    n += f.size;
  return n;
}
static_assert(table_bytes() + sizeof(rvgl_capset::pad0) + sizeof(rvgl_capset::marketing_name) +
                      sizeof(rvgl_capset::reserved) ==
                  sizeof(rvgl_capset),
              "every rvgl_capset member has a row in kFields");

constexpr std::array<const char *, 7> kSectionOrder = {kProtocol, kLimits, kDevice, kMemory,
                                                       kVa,       kQueues, kSpm};

struct Bit {
  uint64_t bit;
  const char *name;
};
constexpr Bit kFeatureBits[] = {
    {RVGL_FEATURE_USERPTR, "USERPTR"},
    {RVGL_FEATURE_USERPTR_RDONLY, "USERPTR_RDONLY"},
    {RVGL_FEATURE_KERNEL_QUEUES, "KERNEL_QUEUES"},
    {RVGL_FEATURE_USER_QUEUES, "USER_QUEUES"},
    {RVGL_FEATURE_SPM, "SPM"},
    {RVGL_FEATURE_EVENT_RING, "EVENT_RING"},
    {RVGL_FEATURE_RESOURCE_IMPORT, "RESOURCE_IMPORT"},
};
constexpr Bit kIpBits[] = {
    {1ull << RVGL_IP_COMPUTE, "COMPUTE"},
    {1ull << RVGL_IP_SDMA, "SDMA"},
};

std::vector<std::string> bit_names(uint64_t value, std::span<const Bit> known) {
  std::vector<std::string> out;
  uint64_t left = value;
  for (const auto &b : known) {
    if (value & b.bit) out.emplace_back(b.name);
    left &= ~b.bit;
  }
  for (unsigned i = 0; i < 64; ++i)
    if (left & (1ull << i)) out.push_back(fmt::format("bit{}", i));
  return out;
}

std::string join(const std::vector<std::string> &v) {
  std::string s;
  for (const auto &x : v)
    s += (s.empty() ? "" : " ") + x;
  return s;
}

std::string human_bytes(uint64_t b) {
  static constexpr const char *kUnits[] = {"KiB", "MiB", "GiB", "TiB"};
  if (b < 1024) return fmt::format("{} B", b);
  double v = static_cast<double>(b);
  unsigned u = 0;
  for (v /= 1024; v >= 1024 && u + 1 < std::size(kUnits); v /= 1024)
    ++u;
  return v == static_cast<double>(static_cast<uint64_t>(v))
             ? fmt::format("{} {}", v, kUnits[u])
             : fmt::format("{:.1f} {}", v, kUnits[u]);
}

std::string spm_version_text(uint64_t v) {
  if (v == 0) return "none";
  return fmt::format("{}.{}", v >> 24, v & 0xffffff);
}

std::string marketing_name(const rvgl_capset &c) {
  return std::string(c.marketing_name, strnlen(c.marketing_name, sizeof(c.marketing_name)));
}

std::string value_text(const Field &f, uint64_t v) {
  switch (f.show) {
    case Show::kDec:
      return fmt::format("{}", v);
    case Show::kHex:
      return fmt::format("{:#x}", v);
    case Show::kAddress:
      return fmt::format("{:#018x}", v);
    case Show::kBytes:
      return fmt::format("{} ({})", v, human_bytes(v));
    case Show::kKhz:
      return fmt::format("{} kHz ({} MHz)", v, v / 1000.0);
    case Show::kFeatures:
      return fmt::format("{:#x} [{}]", v, join(feature_names(v)));
    case Show::kIpMask:
      return fmt::format("{:#x} [{}]", v, join(ip_names(static_cast<uint32_t>(v))));
    case Show::kFamily:
      return fmt::format("{} ({})", v, family_name(static_cast<uint32_t>(v)));
    case Show::kSpmVersion:
      return fmt::format("{:#x} ({})", v, spm_version_text(v));
  }
  return {};
}

}  // namespace

std::vector<std::string> feature_names(uint64_t features) {
  return bit_names(features, kFeatureBits);
}

std::vector<std::string> ip_names(uint32_t mask) {
  return bit_names(mask, kIpBits);
}

std::string family_name(uint32_t family) {
  switch (family) {
    case AMDGPU_FAMILY_SI:
      return "SI";
    case AMDGPU_FAMILY_CI:
      return "CI";
    case AMDGPU_FAMILY_KV:
      return "KV";
    case AMDGPU_FAMILY_VI:
      return "VI";
    case AMDGPU_FAMILY_CZ:
      return "CZ";
    case RVGL_AMDGPU_FAMILY_AI:
      return "AI";
    case AMDGPU_FAMILY_RV:
      return "RV";
    case AMDGPU_FAMILY_NV:
      return "NV";
    case AMDGPU_FAMILY_VGH:
      return "VGH";
    case RVGL_AMDGPU_FAMILY_GC_11_0_0:
      return "GC_11_0_0";
    case AMDGPU_FAMILY_YC:
      return "YC";
    case RVGL_AMDGPU_FAMILY_GC_12_0_0:
      return "GC_12_0_0";
  }
  return "unknown";
}

nlohmann::ordered_json capset_json(const rvgl_capset &c, const CapsetOrigin &origin) {
  nlohmann::ordered_json j;
  j["origin"] = {{"source", origin.source},
                 {"capset_id", origin.capset_id},
                 {"capset_version", origin.capset_version},
                 {"capset_size", origin.capset_size}};
  auto &cs = j["capset"];
  cs = nlohmann::ordered_json::object();
  for (const auto &f : kFields)
    cs[f.name] = f.get(c);
  cs["pad0"] = c.pad0;
  cs["marketing_name"] = marketing_name(c);
  cs["reserved"] = c.reserved;
  j["decoded"] = {
      {"protocol", fmt::format("{}.{}", c.protocol_major, c.protocol_minor)},
      {"features", feature_names(c.features)},
      {"family", family_name(c.family)},
      {"gfx_ip", fmt::format("{}.{}.{}", c.gfx_ip_major, c.gfx_ip_minor, c.gfx_ip_stepping)},
      {"kernel_queue_ips", ip_names(c.kernel_queue_ip_mask)},
      {"user_queue_ips", ip_names(c.user_queue_ip_mask)},
      {"spm_version", spm_version_text(c.spm_version)},
      {"va_size", c.va_end > c.va_start ? c.va_end - c.va_start : 0},
  };
  return j;
}

std::string capset_text(const rvgl_capset &c, const CapsetOrigin &origin) {
  constexpr int kWidth = 22;
  std::string out =
      fmt::format("rocm-virgl capset {} version {} ({} bytes) from {}\n", origin.capset_id,
                  origin.capset_version, origin.capset_size, origin.source);
  out += fmt::format("{:=<{}}\n", "", out.size() - 1);
  const std::string name = marketing_name(c);
  out += fmt::format("{} (gfx IP {}.{}.{}, protocol {}.{})\n", name.empty() ? "(unnamed)" : name,
                     c.gfx_ip_major, c.gfx_ip_minor, c.gfx_ip_stepping, c.protocol_major,
                     c.protocol_minor);
  for (const char *section : kSectionOrder) {
    out += fmt::format("\n{}:\n", section);
    if (section == kDevice)
      out += fmt::format("  {:<{}} = \"{}\"\n", "marketing_name", kWidth, name);
    for (const auto &f : kFields)
      if (f.section == section)
        out += fmt::format("  {:<{}} = {}\n", f.name, kWidth, value_text(f, f.get(c)));
    if (section == kVa && c.va_end > c.va_start)
      out += fmt::format("  {:<{}} = {}\n", "(size)", kWidth, human_bytes(c.va_end - c.va_start));
  }
  // Zero in every v1 host; shown only when not, since then the host writes what this tool
  // cannot name.
  bool reserved_set = c.pad0 != 0;
  for (uint32_t r : c.reserved)
    reserved_set |= r != 0;
  if (reserved_set) {
    out += fmt::format("\nReserved (non-zero):\n  {:<{}} = {:#x}\n", "pad0", kWidth, c.pad0);
    for (size_t i = 0; i < std::size(c.reserved); ++i)
      out +=
          fmt::format("  {:<{}} = {:#x}\n", fmt::format("reserved[{}]", i), kWidth, c.reserved[i]);
  }
  return out;
}

}  // namespace rvgl::info
