#include "trace_decode.h"

#include <fmt/format.h>

#include <cstring>
#include <optional>
#include <vector>

#include "command_fields.h"
#include "context/capture_format.h"

namespace rvgl::trace {

namespace {

using json = nlohmann::ordered_json;

std::string record_type_name(uint32_t type) {
  switch (type) {
    case capture::kSubmit:
      return "SUBM";
    case capture::kResponse:
      return "RESP";
    case capture::kDone:
      return "DONE";
    case capture::kFull:
      return "FULL";
  }
  return "unknown";
}

std::string command_name(uint32_t cmd) {
  const CommandDecoder *d = find_command(cmd);
  return d ? d->layout->name : fmt::format("UNKNOWN({})", cmd);
}

json strings(const std::vector<std::string> &v) {
  json a = json::array();
  for (const auto &s : v)
    a.push_back(s);
  return a;
}

// Reads `T` from `b` at `at` when it is all there.
template <class T>
bool read_at(std::span<const uint8_t> b, size_t at, T *out) {
  if (at > b.size() || b.size() - at < sizeof(T)) return false;
  std::memcpy(out, b.data() + at, sizeof(T));
  return true;
}

class Decoder {
 public:
  Decoder(std::span<const uint8_t> file, const EventSink &sink) : file_(file), sink_(sink) {}

  TraceStats run() {
    if (header_ok()) records(sizeof(capture::FileHeader));
    return stats_;
  }

 private:
  bool header_ok() {
    capture::FileHeader fh;
    if (!read_at(file_, 0, &fh)) {
      problem(0, fmt::format("{} bytes: too short for the {}-byte file header", file_.size(),
                             sizeof(fh)));
      return false;
    }
    if (std::memcmp(fh.magic, capture::kFileMagic, sizeof(fh.magic)) != 0) {
      problem(0, "not a capture file (no RVGLCAP1 magic)");
      return false;
    }
    sink_(json{{"type", "header"},
               {"version", fh.version},
               {"ctx_id", fh.ctx_id},
               {"capset_id", fh.capset_id}});
    if (fh.version != capture::kVersion) {
      problem(0, fmt::format("capture format version {}, this tool reads {}", fh.version,
                             capture::kVersion));
      return false;
    }
    return true;
  }

  void records(size_t pos) {
    while (pos < file_.size()) {
      capture::RecordHeader rh;
      if (!read_at(file_, pos, &rh)) {
        problem(pos, fmt::format("truncated record header: {} of {} bytes", file_.size() - pos,
                                 sizeof(rh)));
        break;
      }
      const size_t body = pos + sizeof(rh);
      if (rh.length > file_.size() - body) {
        problem(pos, fmt::format("truncated {} record: payload of {} bytes, {} present",
                                 record_type_name(rh.type), rh.length, file_.size() - body));
        break;
      }
      ++stats_.records;
      record(pos, rh, file_.subspan(body, rh.length));
      const size_t padded = (uint64_t{rh.length} + 7) / 8 * 8;
      if (padded > file_.size() - body) {
        problem(pos, "record padding missing at the end of the file");
        break;
      }
      pos = body + padded;
    }
  }

  void problem(size_t offset, std::string message) {
    ++stats_.problems;
    sink_(json{{"type", "problem"}, {"offset", offset}, {"message", std::move(message)}});
  }

  json timed(const char *type, size_t offset, const capture::RecordHeader &rh) {
    if (!t0_) t0_ = rh.time_ns;
    return json{{"type", type},
                {"offset", offset},
                {"time_ns", rh.time_ns},
                {"t_ns", static_cast<int64_t>(rh.time_ns - *t0_)}};
  }

  void record(size_t offset, const capture::RecordHeader &rh, std::span<const uint8_t> payload) {
    switch (rh.type) {
      case capture::kSubmit:
        return submit(offset, rh, payload);
      case capture::kResponse:
        return response(offset, rh, payload);
      case capture::kDone: {
        ++stats_.dones;
        json e = timed("DONE", offset, rh);
        e["result"] = rh.result;
        e["result_name"] = errno_name(rh.result);
        if (rh.length) {
          e["problems"] = json::array({fmt::format("{} payload bytes, none expected", rh.length)});
          ++stats_.problems;
        }
        return sink_(e);
      }
      case capture::kFull: {
        json e = timed("FULL", offset, rh);
        e["message"] =
            "the process's capture budget (RVGL_CAPTURE_MAX_MB) is spent: nothing more "
            "was captured";
        if (rh.length) {
          e["problems"] = json::array({fmt::format("{} payload bytes, none expected", rh.length)});
          ++stats_.problems;
        }
        return sink_(e);
      }
    }
    problem(offset, fmt::format("unknown record type {:#010x} ({} payload bytes skipped)", rh.type,
                                rh.length));
  }

  // Frames as the host's FrameDecoder does; where it would fail the submit, the rest of the
  // buffer is not decoded (the host never ran it).
  void submit(size_t offset, const capture::RecordHeader &rh, std::span<const uint8_t> buf) {
    json e = timed("SUBM", offset, rh);
    e["bytes"] = buf.size();
    json requests = json::array();
    std::vector<std::string> problems;
    size_t pos = 0;
    while (pos < buf.size()) {
      rvgl_req_hdr h;
      if (!read_at(buf, pos, &h)) {
        problems.push_back(fmt::format("+{}: truncated request header ({} of {} bytes)", pos,
                                       buf.size() - pos, sizeof(h)));
        break;
      }
      if (h.len < sizeof(h) || h.len > buf.size() - pos || h.len % RVGL_ALIGNMENT) {
        problems.push_back(
            fmt::format("+{}: {} request with len {} ({} bytes left): the host "
                        "fails the submit here",
                        pos, command_name(h.cmd), h.len, buf.size() - pos));
        break;
      }
      requests.push_back(request(pos, h, buf.subspan(pos, h.len)));
      pos += h.len;
    }
    e["requests"] = std::move(requests);
    if (!problems.empty()) {
      stats_.problems += problems.size();
      e["problems"] = strings(problems);
    }
    sink_(e);
  }

  json request(size_t at, const rvgl_req_hdr &h, std::span<const uint8_t> wire) {
    ++stats_.requests;
    json r{{"at", at},     {"cmd", h.cmd},     {"name", command_name(h.cmd)},
           {"len", h.len}, {"seqno", h.seqno}, {"rsp_off", h.rsp_off}};
    Decoded d;
    const CommandDecoder *c = find_command(h.cmd);
    if (!c) {
      ++stats_.unknown_commands;
      d.problem(fmt::format("unknown command {}: the host answers -ENOSYS", h.cmd));
    } else {
      // Zero-extended like the host does, so an older guest's short request reads as it acts.
      std::vector<uint8_t> bytes(wire.begin(), wire.end());
      if (bytes.size() < c->layout->req_size) {
        d.note(fmt::format("short request: {} of {} bytes, zero-extended", bytes.size(),
                           c->layout->req_size));
        bytes.resize(c->layout->req_size, 0);
      }
      c->request(bytes, d);
    }
    if (static_cast<int32_t>(h.seqno - last_seqno_) <= 0)
      d.problem(
          fmt::format("seqno {} not after {}: the host refuses the frame", h.seqno, last_seqno_));
    last_seqno_ = h.seqno;
    if (h.rsp_off != RVGL_RSP_NONE) {
      const uint64_t rsp_size = c ? c->layout->rsp_size : sizeof(rvgl_rsp_hdr);
      if (h.rsp_off % RVGL_ALIGNMENT)
        d.problem(fmt::format("rsp_off {} is not a multiple of 8", h.rsp_off));
      else if (h.rsp_off + rsp_size > RVGL_RSP_AREA_SIZE)
        d.problem(fmt::format("response [{}, +{}) outside the {}-byte response area", h.rsp_off,
                              rsp_size, RVGL_RSP_AREA_SIZE));
    }
    return finish(std::move(r), d);
  }

  json finish(json r, const Decoded &d) {
    r["fields"] = d.json();
    r["text"] = d.text();
    if (!d.problems().empty()) {
      stats_.problems += d.problems().size();
      r["problems"] = strings(d.problems());
    }
    if (!d.notes().empty()) r["notes"] = strings(d.notes());
    return r;
  }

  void response(size_t offset, const capture::RecordHeader &rh, std::span<const uint8_t> rsp) {
    ++stats_.responses;
    json e = timed("RESP", offset, rh);
    e["cmd"] = rh.cmd;
    e["name"] = command_name(rh.cmd);
    e["seqno"] = rh.seqno;
    e["result"] = rh.result;
    e["result_name"] = errno_name(rh.result);
    Decoded d;
    rvgl_rsp_hdr hdr;
    if (!read_at(rsp, 0, &hdr)) {
      d.problem(fmt::format("response of {} bytes, shorter than its header", rsp.size()));
    } else if (hdr.result != rh.result || hdr.seqno != rh.seqno) {
      d.problem(fmt::format("response header says result {} seqno {}, the record {} and {}",
                            errno_name(hdr.result), hdr.seqno, errno_name(rh.result), rh.seqno));
    }
    const CommandDecoder *c = find_command(rh.cmd);
    // A failed request's response is its header (the host zeroes the rest): fields only for
    // success, where they mean something.
    if (c && rh.result == 0 && rsp.size() >= sizeof(hdr)) {
      std::vector<uint8_t> bytes(rsp.begin(), rsp.end());
      if (bytes.size() < c->layout->rsp_size) {
        d.problem(
            fmt::format("response of {} bytes, {} expected", bytes.size(), c->layout->rsp_size));
        bytes.resize(c->layout->rsp_size, 0);
      }
      c->response(bytes, d);
    } else if (!c && rh.result == 0) {
      d.problem(fmt::format("success for unknown command {}", rh.cmd));
    }
    sink_(finish(std::move(e), d));
  }

  std::span<const uint8_t> file_;
  const EventSink &sink_;
  TraceStats stats_;
  std::optional<uint64_t> t0_;
  uint32_t last_seqno_ = 0;
};

std::string time_text(const json &e) {
  return fmt::format("[{:>12.6f}]", e.value("t_ns", int64_t{0}) / 1e9);
}

void append_list(std::string &out, const json &e, const char *key, const char *prefix) {
  if (auto it = e.find(key); it != e.end())
    for (const auto &p : *it)
      out += fmt::format("{}{}\n", prefix, p.get<std::string>());
}

std::string rsp_off_text(uint32_t off) {
  return off == RVGL_RSP_NONE ? std::string("none") : fmt::format("{}", off);
}

}  // namespace

TraceStats decode_capture(std::span<const uint8_t> file, const EventSink &sink) {
  return Decoder(file, sink).run();
}

std::string event_text(const nlohmann::ordered_json &e) {
  const std::string type = e.value("type", "");
  std::string out;
  if (type == "header") {
    out = fmt::format("capture v{}: context {}, capset {}\n", e["version"].get<uint32_t>(),
                      e["ctx_id"].get<uint32_t>(), e["capset_id"].get<uint32_t>());
  } else if (type == "problem") {
    out = fmt::format("!! @{:#x}: {}\n", e["offset"].get<uint64_t>(),
                      e["message"].get<std::string>());
  } else if (type == "SUBM") {
    const auto &reqs = e["requests"];
    out = fmt::format("{} SUBM {} bytes, {} request{}\n", time_text(e), e["bytes"].get<uint64_t>(),
                      reqs.size(), reqs.size() == 1 ? "" : "s");
    for (const auto &r : reqs) {
      const std::string fields = r["text"].get<std::string>();
      out += fmt::format("    {} seqno={} rsp_off={} len={}{}{}\n", r["name"].get<std::string>(),
                         r["seqno"].get<uint32_t>(), rsp_off_text(r["rsp_off"].get<uint32_t>()),
                         r["len"].get<uint32_t>(), fields.empty() ? "" : " ", fields);
      append_list(out, r, "problems", "      !! ");
      append_list(out, r, "notes", "      note: ");
    }
    append_list(out, e, "problems", "    !! ");
  } else if (type == "RESP") {
    const std::string fields = e["text"].get<std::string>();
    out = fmt::format("{} RESP {} seqno={} result={}{}{}\n", time_text(e),
                      e["name"].get<std::string>(), e["seqno"].get<uint32_t>(),
                      e["result_name"].get<std::string>(), fields.empty() ? "" : " ", fields);
    append_list(out, e, "problems", "    !! ");
    append_list(out, e, "notes", "    note: ");
  } else if (type == "DONE") {
    out = fmt::format("{} DONE result={}\n", time_text(e), e["result_name"].get<std::string>());
    append_list(out, e, "problems", "    !! ");
  } else if (type == "FULL") {
    out = fmt::format("{} FULL {}\n", time_text(e), e["message"].get<std::string>());
    append_list(out, e, "problems", "    !! ");
  }
  return out;
}

}  // namespace rvgl::trace
