// The host's own decoder (src/context/frame_decoder.h) with a handler for every v1 command that
// records what it was given, so a test can check that guest-encoded bytes parse into the intended
// fields on the real host path.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "context/command_layouts.h"
#include "context/command_table.h"
#include "context/frame_decoder.h"
#include "context/shmem_view.h"

namespace rvgl::guest::test {

struct RecordedRequest {
  uint32_t cmd;
  uint32_t seqno;
  uint32_t rsp_off;
  uint32_t wire_len;
  std::vector<uint8_t> bytes;  // zero-extended as the handler saw them

  template <class T>
  T as() const {
    T v{};
    std::memcpy(&v, bytes.data(), bytes.size() < sizeof(T) ? bytes.size() : sizeof(T));
    return v;
  }
};

class HostRecorder {
 public:
  std::vector<RecordedRequest> requests;
  // What every handler answers; the response body gets the request's seqno in its first word
  // after the header, so a test can tell responses apart.
  int32_t result = 0;

  static int32_t record(void *self, const rvgl::Request &req, rvgl::Response &rsp) {
    auto *h = static_cast<HostRecorder *>(self);
    h->requests.push_back(
        {req.cmd, req.seqno, req.rsp_off, req.wire_len, {req.bytes.begin(), req.bytes.end()}});
    if (rsp.bytes.size() >= 12) std::memcpy(rsp.bytes.data() + 8, &req.seqno, 4);
    return h->result;
  }

  static rvgl::CommandTable table() {
    rvgl::CommandTable t;
    for (const auto &l : rvgl::kV1Commands)
      t.set(l.cmd, {l.name, &record, l.req_size, l.rsp_size});
    return t;
  }
};

}  // namespace rvgl::guest::test
