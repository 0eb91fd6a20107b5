// Parsing and checking the ROCm capset a host answers (PROTOCOL.md §2).
#pragma once

#include <cstdint>
#include <span>

#include "rocm_virgl_protocol.h"
#include "rvgl_result.h"

namespace rvgl::guest {

// The capset from the host's bytes. Refuses a payload shorter than struct rvgl_capset, another
// wire format, another protocol major, or a shared page size other than this library's layout.
// Longer payloads (a future host) are accepted; only the known prefix is read. The marketing name
// is NUL-terminated in the copy whatever the host sent.
Result<rvgl_capset> parse_capset(std::span<const uint8_t> bytes);

inline bool has_feature(const rvgl_capset &c, uint64_t feature) {
  return (c.features & feature) == feature;
}

}  // namespace rvgl::guest
