// rvgl-info's view of a capset: every field of struct rvgl_capset with its name, its section and
// how to show it, rendered as text (for people) or JSON (for scripts and tests).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "rocm_virgl_protocol.h"

namespace rvgl::info {

// Where a capset came from, for the report's heading.
struct CapsetOrigin {
  std::string source;  // "vtest:<socket>" or "in-process"
  uint32_t capset_id = RVGL_CAPSET_ID;
  uint32_t capset_version = 0;  // the version the host answered
  uint64_t capset_size = 0;     // bytes the host answered (may exceed sizeof(rvgl_capset))
};

// Names of the RVGL_FEATURE_* bits set in `features`; bits this tool does not know come back as
// "bit<N>".
std::vector<std::string> feature_names(uint64_t features);
// Names of the RVGL_IP_* bits of a kernel_queue_ip_mask / user_queue_ip_mask.
std::vector<std::string> ip_names(uint32_t mask);
// AMDGPU_FAMILY_* name without the prefix ("GC_11_0_0"), or "unknown".
std::string family_name(uint32_t family);

// {"origin": {...}, "capset": {<every struct field by its C name>}, "decoded": {names}}.
nlohmann::ordered_json capset_json(const rvgl_capset &c, const CapsetOrigin &origin);
// The same as indented text, grouped in sections.
std::string capset_text(const rvgl_capset &c, const CapsetOrigin &origin);

}  // namespace rvgl::info
