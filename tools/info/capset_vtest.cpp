#include <fmt/format.h>

#include "capset_source.h"
#include "rvgl_capset.h"
#include "rvgl_vtest_transport.h"

namespace rvgl::info {

guest::Result<LoadedCapset> load_capset_vtest(const std::string &socket_path, uint32_t capset_id,
                                              std::chrono::milliseconds timeout) {
  guest::VtestOptions o;
  o.client_name = "rvgl-info";
  o.reply_timeout = timeout;
  auto transport = guest::VtestTransport::connect(socket_path, o);
  if (!transport) return transport.error();
  auto bytes = (*transport)->get_capset(capset_id, RVGL_CAPSET_VERSION);
  if (!bytes)
    return guest::make_error(bytes.error().code,
                             fmt::format("capset {} version {} over vtest: {}", capset_id,
                                         RVGL_CAPSET_VERSION, bytes.error().message));
  auto parsed = guest::parse_capset(*bytes);
  if (!parsed) return parsed.error();
  LoadedCapset out;
  out.capset = *parsed;
  out.origin.source = "vtest:" + socket_path;
  out.origin.capset_id = capset_id;
  // vtest's GET_CAPSET asks for one version and answers it or nothing.
  out.origin.capset_version = RVGL_CAPSET_VERSION;
  out.origin.capset_size = bytes->size();
  out.bytes = std::move(*bytes);
  return out;
}

}  // namespace rvgl::info
