// Decoding a capture file (docs/capture-format.md) into events: the file header, then one event
// per record — SUBM split into framed requests with every field named, RESP with its result and
// response fields, DONE with the submit's result — and a "problem" event for whatever cannot be
// read. The input is guest-controlled bytes: every length is checked against what is there, and
// decoding stops (with a problem) where the rest cannot be trusted.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <span>
#include <string>

namespace rvgl::trace {

struct TraceStats {
  uint64_t records = 0;
  uint64_t requests = 0;   // framed requests found in SUBM records
  uint64_t responses = 0;  // RESP records
  uint64_t dones = 0;      // DONE records
  uint64_t unknown_commands = 0;
  uint64_t problems = 0;  // malformed or truncated data, unknown commands included
};

using EventSink = std::function<void(const nlohmann::ordered_json &event)>;

TraceStats decode_capture(std::span<const uint8_t> file, const EventSink &sink);

// One event as readable text: one line, or several for a SUBM (one per request), each ending in
// '\n'.
std::string event_text(const nlohmann::ordered_json &event);

}  // namespace rvgl::trace
