// The trace tool's one table of v1 commands: for each command id its layout (name and struct
// sizes, from src/context/command_layouts.h, the same the host dispatches with) and the
// functions that decode every field of its request and its response by name.
#pragma once

#include <cstdint>
#include <span>

#include "context/command_layouts.h"
#include "decoded_fields.h"

namespace rvgl::trace {

struct CommandDecoder {
  uint32_t cmd;
  const CommandLayout *layout;
  // `req`: the whole request from its header on, at least layout->req_size bytes (a short
  // request is zero-extended first, as the host does). Anything past the fixed part is passed on
  // (SUBMIT's arrays); other commands report it as a problem.
  void (*request)(std::span<const uint8_t> req, Decoded &out);
  // `rsp`: the response from its header on, at least layout->rsp_size bytes.
  void (*response)(std::span<const uint8_t> rsp, Decoded &out);
};

// nullptr for an id that is not a v1 command.
const CommandDecoder *find_command(uint32_t cmd);
// Every v1 command, in id order.
std::span<const CommandDecoder> all_commands();

}  // namespace rvgl::trace
