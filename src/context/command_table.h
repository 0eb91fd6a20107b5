// One table maps a command id to its name, handler and wire sizes (the style of virglrenderer's
// drm contexts): the decoder never switches on command ids.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <span>

#include "rocm_virgl_protocol.h"

namespace rvgl {

// A request as a handler sees it: 8-byte aligned, zero-extended to at least the size the host
// knows for the command, so fields a shorter (older) guest did not send read as zero.
struct Request {
  uint32_t cmd;
  uint32_t seqno;
  uint32_t rsp_off;
  uint32_t wire_len;               // len the guest sent
  std::span<const uint8_t> bytes;  // max(wire_len, table size) bytes

  template <class T>
  const T &as() const {
    static_assert(alignof(T) <= 8);
    return *reinterpret_cast<const T *>(bytes.data());
  }
};

// The response under construction: a zeroed shadow buffer of the command's response size.
// The decoder fills in the header; the handler fills in the rest.
struct Response {
  std::span<uint8_t> bytes;

  template <class T>
  T &as() {
    static_assert(alignof(T) <= 8);
    return *reinterpret_cast<T *>(bytes.data());
  }
};

// Handlers return 0 or a negative errno, which becomes the response's result, or kDeferred when
// they took over writing the response later (see FrameDecoder).
inline constexpr int32_t kDeferred = 1;

using Handler = int32_t (*)(void *target, const Request &req, Response &rsp);

struct CommandEntry {
  const char *name = nullptr;
  Handler handler = nullptr;
  uint32_t req_size = 0;  // size of the v1 request struct (fixed part)
  uint32_t rsp_size = 0;  // size of the v1 response struct
};

class CommandTable {
 public:
  constexpr void set(uint32_t cmd, CommandEntry e) {
    if (cmd < entries_.size()) entries_[cmd] = e;
  }
  // nullptr for ids this host does not know or does not implement.
  const CommandEntry *find(uint32_t cmd) const {
    if (cmd >= entries_.size() || entries_[cmd].handler == nullptr) return nullptr;
    return &entries_[cmd];
  }
  const char *name(uint32_t cmd) const {
    return cmd < entries_.size() ? entries_[cmd].name : nullptr;
  }

 private:
  std::array<CommandEntry, RVGL_CMD_COUNT> entries_{};
};

// Binds a member function as a table handler without a virtual call per request.
template <class T, int32_t (T::*Fn)(const Request &, Response &)>
int32_t bind_handler(void *target, const Request &req, Response &rsp) {
  return (static_cast<T *>(target)->*Fn)(req, rsp);
}

}  // namespace rvgl
