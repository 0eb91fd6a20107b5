// rvgl-trace: a real capture of every v1 command decodes with names, fields and results that
// match what the guest sent and read back; broken files are reported, never crash the decoder.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include "command_fields.h"
#include "context/capture_format.h"
#include "run_program.h"
#include "trace_decode.h"
#include "trace_workload.h"

using namespace rvgl;
using namespace rvgl::tools_test;
using json = nlohmann::ordered_json;

namespace {

std::vector<uint8_t> read_file(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

struct Decoded {
  std::vector<json> events;
  trace::TraceStats stats;
};

Decoded decode(std::span<const uint8_t> bytes) {
  Decoded d;
  d.stats = trace::decode_capture(bytes, [&](const json &e) { d.events.push_back(e); });
  return d;
}

// Every request of every SUBM, in order.
std::vector<json> requests(const Decoded &d) {
  std::vector<json> out;
  for (const auto &e : d.events)
    if (e["type"] == "SUBM")
      for (const auto &r : e["requests"])
        out.push_back(r);
  return out;
}

std::vector<json> of_type(const Decoded &d, const char *type) {
  std::vector<json> out;
  for (const auto &e : d.events)
    if (e["type"] == type) out.push_back(e);
  return out;
}

const json *find_request(const std::vector<json> &reqs, uint32_t seqno) {
  for (const auto &r : reqs)
    if (r["seqno"] == seqno) return &r;
  return nullptr;
}

// Renders every event both ways, as the program does; neither may throw.
void render_all(const Decoded &d) {
  for (const auto &e : d.events) {
    CHECK_NOTHROW(trace::event_text(e));
    CHECK_NOTHROW(e.dump());
  }
}

// A capture file built by hand, for the malformed cases.
class FileBuilder {
 public:
  FileBuilder() {
    capture::FileHeader h{};
    std::memcpy(h.magic, capture::kFileMagic, sizeof(h.magic));
    h.version = capture::kVersion;
    h.ctx_id = 7;
    h.capset_id = RVGL_CAPSET_ID;
    put(&h, sizeof(h));
  }
  FileBuilder &record(uint32_t type, std::span<const uint8_t> payload, uint32_t cmd = 0,
                      uint32_t seqno = 0, int32_t result = 0, uint32_t length_override = ~0u) {
    capture::RecordHeader r{
        type,   length_override == ~0u ? uint32_t(payload.size()) : length_override,
        cmd,    seqno,
        result, 0,
        ++time_};
    put(&r, sizeof(r));
    put(payload.data(), payload.size());
    bytes_.resize((bytes_.size() + 7) / 8 * 8, 0);
    return *this;
  }
  template <class T>
  FileBuilder &record_of(uint32_t type, const T &v, uint32_t cmd = 0, uint32_t seqno = 0,
                         int32_t result = 0) {
    return record(type, {reinterpret_cast<const uint8_t *>(&v), sizeof(v)}, cmd, seqno, result);
  }
  std::vector<uint8_t> bytes() const { return bytes_; }

 private:
  void put(const void *p, size_t n) {
    const size_t at = bytes_.size();
    bytes_.resize(at + n);
    if (n) std::memcpy(bytes_.data() + at, p, n);
  }
  std::vector<uint8_t> bytes_;
  uint64_t time_ = 1000;
};

}  // namespace

TEST_CASE("trace decodes every v1 command", "[tools][trace]") {
  auto w = run_captured_workload();
  const auto bytes = read_file(w->path);
  REQUIRE(bytes.size() > sizeof(capture::FileHeader));
  const Decoded d = decode(bytes);
  render_all(d);

  REQUIRE(!d.events.empty());
  CHECK(d.events[0]["type"] == "header");
  CHECK(d.events[0]["ctx_id"] == 1);
  CHECK(d.events[0]["capset_id"] == RVGL_CAPSET_ID);

  // Exactly the two problems the workload planted: the unknown command and the bad frame.
  CHECK(d.stats.unknown_commands == 1);
  CHECK(d.stats.problems == 2);
  CHECK(of_type(d, "problem").empty());
  CHECK(d.stats.dones == w->submits);
  CHECK(d.stats.responses == w->sent.size());

  const auto reqs = requests(d);
  SECTION("every command appears by name, in a SUBM and in a RESP") {
    for (const auto &l : kV1Commands) {
      INFO(l.name);
      bool in_subm = false, in_resp = false;
      for (const auto &r : reqs)
        in_subm |= r["name"] == l.name && r["cmd"] == l.cmd;
      for (const auto &r : of_type(d, "RESP"))
        in_resp |= r["name"] == l.name;
      CHECK(in_subm);
      CHECK(in_resp);
    }
  }

  SECTION("each response carries the result the guest read, for the request it answers") {
    const auto resps = of_type(d, "RESP");
    REQUIRE(resps.size() == w->sent.size());
    for (size_t i = 0; i < resps.size(); ++i) {
      const auto &s = w->sent[i];
      INFO("response " << i << ": " << resps[i].dump());
      CHECK(resps[i]["cmd"] == s.cmd);
      CHECK(resps[i]["seqno"] == s.seqno);
      CHECK(resps[i]["result"] == s.result);
      CHECK(resps[i]["result_name"] == trace::errno_name(s.result));
      const json *req = find_request(reqs, s.seqno);
      REQUIRE(req);
      CHECK((*req)["cmd"] == s.cmd);
    }
    // Text shows the errno by name; the SET_DEST before ACQUIRE was refused.
    const json *sd = nullptr;
    for (const auto &r : resps)
      if (r["cmd"] == RVGL_CMD_SPM_SET_DEST) sd = &r;
    REQUIRE(sd);
    CHECK((*sd)["result"].get<int32_t>() == -EPERM);
    CHECK(trace::event_text(*sd).find("result=-E") != std::string::npos);
  }

  SECTION("request fields are decoded by name with the values sent") {
    auto req_of = [&](uint32_t cmd, size_t nth = 0) -> json {
      for (const auto &r : reqs)
        if (r["cmd"] == cmd && nth-- == 0) return r["fields"];
      FAIL("no request " << cmd);
      return {};
    };
    CHECK(req_of(RVGL_CMD_QUERY_INFO, 0)["query_name"] == "MEMORY");
    CHECK(req_of(RVGL_CMD_QUERY_INFO, 1)["query_name"] == "USAGE");
    CHECK(req_of(RVGL_CMD_QUERY_INFO, 2)["query_name"] == "TIMESTAMP");
    const json bo = req_of(RVGL_CMD_BO_CREATE);
    CHECK(bo["size"] == w->bo_size);
    CHECK(bo["domain_names"] == json::array({"GTT"}));
    CHECK(bo["blob_id"] == 1);
    const json vm = req_of(RVGL_CMD_VA_MAP);
    CHECK(vm["bo"] == w->bo);
    CHECK(vm["va"] == w->ib_va);
    CHECK(vm["size"] == w->bo_size);
    CHECK(vm["flags_names"] == json::array({"READ", "EXECUTE"}));
    const json qc = req_of(RVGL_CMD_QUEUE_CREATE, 1);
    CHECK(qc["kind_name"] == "KERNEL");
    CHECK(qc["ip_name"] == "SDMA");
    CHECK(qc["priority_name"] == "LOW");
    CHECK(qc["ring_idx"] == 2);
    const json sb = req_of(RVGL_CMD_SUBMIT, 1);
    CHECK(sb["queue"] == w->queue_b);
    CHECK(sb["num_ibs"] == 1);
    CHECK(sb["num_waits"] == 1);
    REQUIRE(sb["ibs"].size() == 1);
    CHECK(sb["ibs"][0]["va"] == w->ib_va);
    CHECK(sb["ibs"][0]["size"] == w->ib_bytes);
    REQUIRE(sb["waits"].size() == 1);
    CHECK(sb["waits"][0]["queue"] == w->queue_a);
    CHECK(sb["waits"][0]["seq"] == w->seq_a);
    CHECK(req_of(RVGL_CMD_QUEUE_STATE)["queue"] == w->queue_b);
    CHECK(req_of(RVGL_CMD_QUEUE_DESTROY, 1)["queue"] == w->queue_a);
    CHECK(req_of(RVGL_CMD_VA_UNMAP)["va"] == w->ib_va);
    CHECK(req_of(RVGL_CMD_BO_FREE)["bo"] == w->bo);
    CHECK(req_of(RVGL_CMD_SPM_ACQUIRE)["ring_idx"] == 3);
    const json sd = req_of(RVGL_CMD_SPM_SET_DEST);
    CHECK(sd["bo"] == w->bo);
    CHECK(sd["size"] == w->spm_dest_size);
    CHECK(sd["timeout_ms"] == 5);
    CHECK(req_of(RVGL_CMD_SPM_RELEASE).contains("xcp"));
    CHECK(req_of(RVGL_CMD_NOP).empty());
  }

  SECTION("response fields are decoded by name with the values read back") {
    std::vector<json> by_cmd[RVGL_CMD_COUNT];
    for (const auto &r : of_type(d, "RESP"))
      if (r["cmd"] < RVGL_CMD_COUNT) by_cmd[r["cmd"].get<uint32_t>()].push_back(r["fields"]);
    REQUIRE(by_cmd[RVGL_CMD_QUERY_INFO].size() == 3);
    CHECK(by_cmd[RVGL_CMD_QUERY_INFO][0]["data"][0]["vram_total"] == w->vram_total);
    CHECK(by_cmd[RVGL_CMD_QUERY_INFO][1]["data"][0]["max_objects"] == w->max_objects);
    CHECK(by_cmd[RVGL_CMD_QUERY_INFO][2]["data"][0].contains("gpu_timestamp"));
    CHECK(by_cmd[RVGL_CMD_BO_CREATE].at(0)["bo"] == w->bo);
    REQUIRE(by_cmd[RVGL_CMD_QUEUE_CREATE].size() == 2);
    CHECK(by_cmd[RVGL_CMD_QUEUE_CREATE][0]["queue"] == w->queue_a);
    CHECK(by_cmd[RVGL_CMD_QUEUE_CREATE][1]["queue"] == w->queue_b);
    REQUIRE(by_cmd[RVGL_CMD_SUBMIT].size() == 2);
    CHECK(by_cmd[RVGL_CMD_SUBMIT][0]["seq"] == w->seq_a);
    CHECK(by_cmd[RVGL_CMD_SUBMIT][1]["seq"] == w->seq_b);
    const json qs = by_cmd[RVGL_CMD_QUEUE_STATE].at(0);
    CHECK(qs["state"] == w->state.state);
    CHECK(qs["flags"] == w->state.flags);
    CHECK(qs["last_submitted_seq"] == w->state.last_submitted_seq);
    CHECK(qs["last_completed_seq"] == w->state.last_completed_seq);
    CHECK(qs["error"] == w->state.error);
  }

  SECTION("the unknown command and the malformed frame are reported") {
    const json *unknown = nullptr;
    for (const auto &r : reqs)
      if (r["cmd"] == kUnknownCommand) unknown = &r;
    REQUIRE(unknown);
    CHECK((*unknown)["name"] == "UNKNOWN(99)");
    REQUIRE((*unknown)["problems"].size() == 1);
    const auto subms = of_type(d, "SUBM");
    const json &last = subms.back();
    CHECK(last["requests"].empty());
    REQUIRE(last["problems"].size() == 1);
    CHECK(last["problems"][0].get<std::string>().find("len 12") != std::string::npos);
    CHECK(of_type(d, "DONE").back()["result"] == w->malformed_result);
    CHECK(w->malformed_result == -EINVAL);
  }

  SECTION("the rvgl-trace program prints the same, as text and as JSON lines") {
    const std::string prog = path_from_env("RVGL_TRACE_BIN");
    if (prog.empty()) {
      WARN("RVGL_TRACE_BIN is not set (run through meson test): program not checked");
      return;
    }
    const auto text = run_program({prog, w->path});
    INFO(text.err);
    CHECK(text.exit_status == 1);  // the planted problems
    for (const auto &l : kV1Commands) {
      CHECK(text.out.find(fmt::format("    {} seqno=", l.name)) != std::string::npos);
      CHECK(text.out.find(fmt::format("RESP {} seqno=", l.name)) != std::string::npos);
    }
    CHECK(text.out.find("UNKNOWN(99)") != std::string::npos);
    CHECK(text.out.find("!! ") != std::string::npos);

    const auto js = run_program({prog, "--json", w->path});
    CHECK(js.exit_status == 1);
    std::istringstream lines(js.out);
    std::string line;
    size_t n = 0;
    json summary;
    while (std::getline(lines, line)) {
      const json e = json::parse(line);
      if (e["type"] == "summary") {
        summary = e;
        continue;
      }
      REQUIRE(n < d.events.size());
      CHECK(e == d.events[n]);
      ++n;
    }
    CHECK(n == d.events.size());
    CHECK(summary["problems"] == d.stats.problems);
    CHECK(summary["requests"] == d.stats.requests);
  }
}

TEST_CASE("trace reports every truncation of a real capture", "[tools][trace]") {
  auto w = run_captured_workload();
  const auto bytes = read_file(w->path);
  const Decoded full = decode(bytes);
  // Where the records start and end: a cut there is a shorter, still well-formed file.
  std::set<size_t> boundaries = {sizeof(capture::FileHeader), bytes.size()};
  for (const auto &e : full.events)
    if (e.contains("offset") && e["type"] != "problem")
      boundaries.insert(e["offset"].get<size_t>());
  for (size_t n = 0; n < bytes.size(); ++n) {
    const Decoded d = decode(std::span(bytes).first(n));
    if (boundaries.count(n)) {
      CHECK(of_type(d, "problem").empty());
    } else {
      INFO("cut at " << n);
      CHECK(of_type(d, "problem").size() == 1);
    }
  }
}

TEST_CASE("trace survives garbage and reports what it cannot read", "[tools][trace]") {
  SECTION("empty, short and foreign files") {
    CHECK(decode({}).stats.problems == 1);
    const std::vector<uint8_t> elf = {0x7f, 'E', 'L', 'F', 2, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                      0,    0,   0,   0,   0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    const Decoded d = decode(elf);
    CHECK(d.stats.problems == 1);
    CHECK(of_type(d, "header").empty());
    auto wrong_version = FileBuilder().bytes();
    wrong_version[8] = 9;
    CHECK(decode(wrong_version).stats.problems == 1);
  }

  SECTION("a record longer than the file") {
    auto f = FileBuilder().record(capture::kSubmit, {}, 0, 0, 0, 1u << 30).bytes();
    const Decoded d = decode(f);
    REQUIRE(of_type(d, "problem").size() == 1);
    CHECK(of_type(d, "problem")[0]["message"].get<std::string>().find("truncated SUBM") !=
          std::string::npos);
  }

  SECTION("an unknown record type is skipped and what follows still decodes") {
    const uint8_t junk[5] = {1, 2, 3, 4, 5};
    auto f = FileBuilder().record(0x4b4e554a, junk).record(capture::kDone, {}, 0, 0, -EIO).bytes();
    const Decoded d = decode(f);
    CHECK(of_type(d, "problem").size() == 1);
    REQUIRE(of_type(d, "DONE").size() == 1);
    CHECK(of_type(d, "DONE")[0]["result_name"] == "-EIO");
  }

  SECTION("a FULL record ends a capture whose budget was spent, as no problem") {
    auto f = FileBuilder().record(capture::kDone, {}, 0, 0, 0).record(capture::kFull, {}).bytes();
    const Decoded d = decode(f);
    render_all(d);
    CHECK(d.stats.problems == 0);
    REQUIRE(of_type(d, "FULL").size() == 1);
    CHECK(of_type(d, "FULL")[0]["message"].get<std::string>().find("RVGL_CAPTURE_MAX_MB") !=
          std::string::npos);
  }

  SECTION("SUBMIT arrays longer than the frame") {
    struct {
      rvgl_req_submit s;
      rvgl_ib ib;
    } req{};
    req.s.hdr = {RVGL_CMD_SUBMIT, sizeof(req), 1, RVGL_RSP_NONE};
    req.s.num_ibs = 0xffffffffu;
    req.s.num_waits = 0xffffffffu;
    const Decoded d = decode(FileBuilder().record_of(capture::kSubmit, req).bytes());
    render_all(d);
    const auto r = requests(d);
    REQUIRE(r.size() == 1);
    CHECK(r[0]["fields"]["ibs"].size() == 1);
    CHECK(r[0]["fields"]["waits"].empty());
    REQUIRE(r[0]["problems"].size() == 1);
    CHECK(r[0]["problems"][0].get<std::string>().find("arrays truncated") != std::string::npos);
  }

  SECTION("short and long requests, bad response slots, seqnos going back") {
    struct {
      rvgl_req_hdr short_bo;  // BO_CREATE with only its header: zero-extended
      rvgl_req_query_info long_qi;
      uint64_t extra;
      rvgl_req_nop misplaced;
      rvgl_req_nop backwards;
    } buf{};
    buf.short_bo = {RVGL_CMD_BO_CREATE, sizeof(rvgl_req_hdr), 5, 0};
    buf.long_qi.hdr = {RVGL_CMD_QUERY_INFO, sizeof(buf.long_qi) + 8, 6, 128};
    buf.misplaced.hdr = {RVGL_CMD_NOP, sizeof(rvgl_req_nop), 7, RVGL_RSP_AREA_SIZE - 4};
    buf.backwards.hdr = {RVGL_CMD_NOP, sizeof(rvgl_req_nop), 3, RVGL_RSP_NONE};
    const Decoded d = decode(FileBuilder().record_of(capture::kSubmit, buf).bytes());
    render_all(d);
    const auto r = requests(d);
    REQUIRE(r.size() == 4);
    CHECK(r[0]["fields"]["size"] == 0);
    CHECK(r[0]["notes"].size() == 1);
    CHECK(!r[0].contains("problems"));
    CHECK(r[1]["notes"].size() == 1);
    CHECK(r[2]["problems"].size() == 1);
    CHECK(r[3]["problems"].size() == 1);
    CHECK(trace::event_text(d.events[1]).find("rsp_off=none") != std::string::npos);
  }

  SECTION("responses that do not fit their command") {
    rvgl_rsp_query_info qi{};
    qi.hdr.seqno = 1;
    qi.query = RVGL_INFO_MEMORY;
    qi.size = 0xffff;
    const uint8_t two[2] = {0, 0};
    rvgl_rsp_hdr hdr{0, 4};
    const Decoded d = decode(FileBuilder()
                                 .record_of(capture::kResponse, qi, RVGL_CMD_QUERY_INFO, 1, 0)
                                 .record(capture::kResponse, two, RVGL_CMD_BO_CREATE, 2, 0)
                                 .record_of(capture::kResponse, hdr, RVGL_CMD_SUBMIT, 3, 0)
                                 .record_of(capture::kResponse, hdr, 77, 4, 0)
                                 .bytes());
    render_all(d);
    const auto resps = of_type(d, "RESP");
    REQUIRE(resps.size() == 4);
    CHECK(resps[0]["problems"].size() == 1);  // size past the data area; data still shown
    CHECK(resps[0]["fields"]["data"][0].contains("vram_total"));
    CHECK(resps[1]["problems"].size() == 1);  // shorter than a header
    CHECK(resps[2]["problems"].size() == 2);  // seqno mismatch, and 8 of 16 bytes
    CHECK(resps[3]["name"] == "UNKNOWN(77)");
    CHECK(resps[3]["problems"].size() == 1);  // success for an unknown command
  }

  SECTION("random records after a valid header") {
    std::mt19937_64 rng(20261130);
    for (int round = 0; round < 300; ++round) {
      FileBuilder f;
      const int records = 1 + static_cast<int>(rng() % 6);
      for (int i = 0; i < records; ++i) {
        std::vector<uint8_t> payload(rng() % 200);
        for (auto &b : payload)
          b = static_cast<uint8_t>(rng());
        // Frames that look right often enough to reach the field decoders.
        if (payload.size() >= 16 && rng() % 2) {
          auto *h = reinterpret_cast<rvgl_req_hdr *>(payload.data());
          h->cmd = static_cast<uint32_t>(rng() % (RVGL_CMD_COUNT + 2));
          h->len = static_cast<uint32_t>(payload.size() / 8 * 8);
        }
        static constexpr uint32_t kTypes[] = {capture::kSubmit, capture::kResponse, capture::kDone,
                                              capture::kFull, 0x12345678};
        f.record(kTypes[rng() % 5], payload, static_cast<uint32_t>(rng() % (RVGL_CMD_COUNT + 2)),
                 static_cast<uint32_t>(rng()), static_cast<int32_t>(rng()));
      }
      auto bytes = f.bytes();
      if (rng() % 3 == 0) bytes.resize(rng() % (bytes.size() + 1));
      Decoded d;
      REQUIRE_NOTHROW(d = decode(bytes));
      render_all(d);
    }
  }
}
