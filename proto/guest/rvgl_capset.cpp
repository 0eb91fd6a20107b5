#include "rvgl_capset.h"

#include <cerrno>
#include <cstring>
#include <string>

namespace rvgl::guest {

Result<rvgl_capset> parse_capset(std::span<const uint8_t> bytes) {
  if (bytes.size() < sizeof(rvgl_capset))
    return make_error(-EPROTO, "capset: " + std::to_string(bytes.size()) +
                                   " bytes, shorter than the " +
                                   std::to_string(sizeof(rvgl_capset)) + " of version 1");
  rvgl_capset c;
  std::memcpy(&c, bytes.data(), sizeof(c));
  c.marketing_name[RVGL_MARKETING_NAME_SIZE - 1] = '\0';
  if (c.wire_format_version != RVGL_WIRE_FORMAT_VERSION)
    return make_error(-EPROTONOSUPPORT,
                      "capset: wire format " + std::to_string(c.wire_format_version) +
                          ", this library speaks " + std::to_string(RVGL_WIRE_FORMAT_VERSION));
  if (c.protocol_major != RVGL_PROTOCOL_MAJOR)
    return make_error(-EPROTONOSUPPORT,
                      "capset: protocol major " + std::to_string(c.protocol_major) +
                          ", this library speaks " + std::to_string(RVGL_PROTOCOL_MAJOR));
  if (c.shmem_size != RVGL_SHMEM_SIZE)
    return make_error(-EPROTO, "capset: shared page of " + std::to_string(c.shmem_size) +
                                   " bytes, the layout needs " + std::to_string(RVGL_SHMEM_SIZE));
  return c;
}

}  // namespace rvgl::guest
