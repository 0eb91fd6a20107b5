// Issue 6: a recorded SPM stream becomes CSV, trace-event JSON (valid, loadable) and a PNG.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "rocm_virgl_protocol.h"
#include "spm_decode.h"
#include "spm_export.h"
#include "spm_recording.h"

using namespace rvgl::spm;

namespace {

std::string temp_path(const char *name) {
  const char *t = std::getenv("TMPDIR");
  return std::string(t && *t ? t : "/tmp") + "/rvgl-spm-test-" + std::to_string(getpid()) + "-" +
         name;
}

// One destination buffer as the kernel fills it: per XCC a header and `samples` samples of
// `lines` lines, timestamps starting at t0 and rising by 100 ticks, counters = f(sample, slot).
std::vector<uint8_t> make_buffer(const SpmRecordingHeader &h, uint32_t samples, uint64_t t0,
                                 bool loss) {
  const uint32_t lines = lines_per_sample(h);
  const uint32_t slice = 32 + samples * lines * 32;
  std::vector<uint8_t> buf(size_t{slice} * h.num_xcc);
  for (uint32_t x = 0; x < h.num_xcc; ++x) {
    uint8_t *s = buf.data() + size_t{x} * slice;
    rvgl_spm_buffer_header hdr{};
    hdr.version = 1u << 24;
    hdr.bytes_copied = samples * lines * 32;
    hdr.has_data_loss = loss;
    std::memcpy(s, &hdr, sizeof(hdr));
    for (uint32_t k = 0; k < samples; ++k) {
      uint16_t *u = reinterpret_cast<uint16_t *>(s + 32 + size_t{k} * lines * 32);
      const uint64_t ts = t0 + k * 100;
      std::memcpy(u, &ts, 8);
      for (uint32_t c = 4; c < lines * 16; ++c)
        u[c] = static_cast<uint16_t>(k * 10 + c + x);
    }
  }
  return buf;
}

std::string slurp(const std::string &p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

TEST_CASE("a recorded stream round-trips and exports to CSV, trace JSON and PNG", "[spm][tools]") {
  SpmRecordingHeader h{};
  h.num_xcc = 2;
  h.global_lines = 2;
  h.se_lines = 1;
  h.shader_engines = 2;
  h.counter_freq_khz = 100000;
  const std::string rec = temp_path("rec.bin");
  {
    SpmRecordingWriter w;
    REQUIRE(w.open(rec, h));
    auto b1 = make_buffer(h, 5, 1000, false);
    auto b2 = make_buffer(h, 3, 2000, true);
    REQUIRE(w.append(b1.data(), static_cast<uint32_t>(b1.size())));
    REQUIRE(w.append(b2.data(), static_cast<uint32_t>(b2.size())));
  }
  SpmRecording r;
  std::string err;
  REQUIRE(read_recording(rec, &r, &err));
  REQUIRE(r.buffers.size() == 2);
  std::vector<Sample> samples;
  DecodeStats st;
  for (const auto &b : r.buffers)
    REQUIRE(decode_buffer(r.header, b, &samples, &st, &err));
  CHECK(st.samples == 2 * (5 + 3));
  CHECK(st.slices_with_loss == 2);
  CHECK(st.timestamp_regressions == 0);
  CHECK(counters_per_sample(h) == (2 + 2) * 16 - 4);
  CHECK(samples[1].counters[0] == 10 + 4);

  ExportOptions opt;
  opt.counter_freq_khz = h.counter_freq_khz;
  opt.counters = {0, 3, 5};
  const std::string csv = temp_path("out.csv"), json = temp_path("out.json"),
                    png = temp_path("out.png");
  REQUIRE(write_csv(csv, samples, opt, &err));
  const std::string c = slurp(csv);
  CHECK(std::count(c.begin(), c.end(), '\n') == 1 + 16);
  CHECK(c.rfind("xcc,timestamp,time_us,c0,c3,c5\n", 0) == 0);

  REQUIRE(write_trace_json(json, samples, opt, &err));
  const auto doc = nlohmann::json::parse(slurp(json));  // throws if not valid JSON
  size_t counters = 0;
  for (const auto &e : doc.at("traceEvents")) {
    if (e.at("ph") == "C") {
      ++counters;
      CHECK(e.at("args").contains("value"));
      CHECK(e.at("ts").is_number());
    }
  }
  CHECK(counters == 16 * 3);

  REQUIRE(write_png(png, samples, opt, &err));
  const std::string p = slurp(png);
  REQUIRE(p.size() > 8);
  CHECK(std::memcmp(p.data(), "\x89PNG\r\n\x1a\n", 8) == 0);

  // A header lying about its size is refused, not read past.
  auto bad = make_buffer(h, 2, 0, false);
  rvgl_spm_buffer_header lie{};
  lie.bytes_copied = 1u << 30;
  std::memcpy(bad.data(), &lie, sizeof(lie));
  std::vector<Sample> none;
  CHECK_FALSE(decode_buffer(h, bad, &none, &st, &err));
  for (const auto &f : {rec, csv, json, png})
    unlink(f.c_str());
}

TEST_CASE("a sample split across two buffers is joined when decoded as a stream", "[spm][tools]") {
  SpmRecordingHeader h{};
  h.num_xcc = 2;
  h.global_lines = 1;
  h.se_lines = 1;
  h.shader_engines = 2;  // 3 lines = 96 bytes per sample
  const uint32_t sample_bytes = lines_per_sample(h) * 32;
  // Three whole samples per XCC, cut after 1.5 samples: each slice ends 32 bytes into a sample,
  // as the kernel's line-granular copy leaves it.
  const auto whole = make_buffer(h, 3, 1000, false);
  const uint32_t whole_slice = static_cast<uint32_t>(whole.size() / h.num_xcc);
  const uint32_t first_part = sample_bytes + 32, second_part = 3 * sample_bytes - first_part;
  auto split = [&](uint32_t from, uint32_t bytes) {
    std::vector<uint8_t> buf(size_t{32 + bytes} * h.num_xcc);
    for (uint32_t x = 0; x < h.num_xcc; ++x) {
      uint8_t *s = buf.data() + size_t{x} * (32 + bytes);
      std::memcpy(s, whole.data() + size_t{x} * whole_slice, 32);
      rvgl_spm_buffer_header hdr;
      std::memcpy(&hdr, s, sizeof(hdr));
      hdr.bytes_copied = bytes;
      std::memcpy(s, &hdr, sizeof(hdr));
      std::memcpy(s + 32, whole.data() + size_t{x} * whole_slice + 32 + from, bytes);
    }
    return buf;
  };
  const auto a = split(0, first_part), b = split(first_part, second_part);

  std::vector<Sample> expect, got;
  DecodeStats st_expect, st_got;
  std::string err;
  REQUIRE(decode_buffer(h, whole, &expect, &st_expect, &err));
  REQUIRE(expect.size() == 6);
  StreamState stream;
  REQUIRE(decode_buffer(h, a, &got, &st_got, &err, &stream));
  REQUIRE(decode_buffer(h, b, &got, &st_got, &err, &stream));
  std::stable_sort(got.begin(), got.end(), [](auto &l, auto &r) { return l.xcc < r.xcc; });
  REQUIRE(got.size() == expect.size());
  for (size_t i = 0; i < got.size(); ++i) {
    CHECK(got[i].xcc == expect[i].xcc);
    CHECK(got[i].timestamp == expect[i].timestamp);
    CHECK(got[i].counters == expect[i].counters);
  }
  CHECK(st_got.timestamp_regressions == 0);

  // A slice reporting data loss drops the unfinished sample instead of joining across the gap.
  auto lossy = b;
  for (uint32_t x = 0; x < h.num_xcc; ++x) {
    rvgl_spm_buffer_header hdr;
    std::memcpy(&hdr, lossy.data() + size_t{x} * (32 + second_part), sizeof(hdr));
    hdr.has_data_loss = 1;
    std::memcpy(lossy.data() + size_t{x} * (32 + second_part), &hdr, sizeof(hdr));
  }
  std::vector<Sample> gap;
  DecodeStats st_gap;
  StreamState s2;
  REQUIRE(decode_buffer(h, a, &gap, &st_gap, &err, &s2));
  REQUIRE(decode_buffer(h, lossy, &gap, &st_gap, &err, &s2));
  CHECK(st_gap.slices_with_loss == 2);
  // Not joined: 1 whole sample per XCC from each buffer (joined, it would be 3 per XCC).
  CHECK(gap.size() == 4);
}

TEST_CASE("a recording header without XCCs is refused", "[spm][tools]") {
  SpmRecordingHeader h{};
  std::vector<uint8_t> buf(256);
  std::vector<Sample> out;
  DecodeStats st;
  std::string err;
  CHECK_FALSE(decode_buffer(h, buf, &out, &st, &err));
}
