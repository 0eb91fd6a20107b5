// Builds raw command streams for tests, including deliberately malformed ones.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "rocm_virgl_protocol.h"

namespace rvgl::test {

class StreamBuilder {
 public:
  // Appends a request whose body is `req` (a v1 request struct); fills in the header.
  template <class T>
  StreamBuilder &add(T req, uint32_t cmd, uint32_t seqno, uint32_t rsp_off) {
    req.hdr = rvgl_req_hdr{cmd, static_cast<uint32_t>(sizeof(T)), seqno, rsp_off};
    append(&req, sizeof(T));
    return *this;
  }
  // Appends raw header + body bytes exactly as given (len is not recomputed).
  StreamBuilder &raw(rvgl_req_hdr hdr, std::span<const uint8_t> body = {}) {
    append(&hdr, sizeof(hdr));
    append(body.data(), body.size());
    return *this;
  }
  StreamBuilder &bytes(std::span<const uint8_t> b) {
    append(b.data(), b.size());
    return *this;
  }
  std::span<const uint8_t> span() const { return buf_; }
  size_t size() const { return buf_.size(); }

 private:
  void append(const void *p, size_t n) {
    const auto *b = static_cast<const uint8_t *>(p);
    buf_.insert(buf_.end(), b, b + n);
  }
  std::vector<uint8_t> buf_;
};

}  // namespace rvgl::test
