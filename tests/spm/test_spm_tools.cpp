// Issue 6: a recorded SPM stream becomes CSV, trace-event JSON (valid, loadable) and a PNG.
// Issue 17: recordings carry counter names (version 2; version 1 still reads), and the CSV and
// trace use them. The PNG's pixels are checked in tests/tools/test_spm_png.cpp.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "rocm_virgl_protocol.h"
#include "spm_decode.h"
#include "spm_export.h"
#include "spm_plot.h"
#include "spm_recording.h"
#include "spm_series.h"
#include "spm_summary.h"

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
    REQUIRE(w.open(rec, h, {"Test GPU (gfx IP 1.2.3)", layout_counter_names(h)}));
    auto b1 = make_buffer(h, 5, 1000, false);
    auto b2 = make_buffer(h, 3, 2000, true);
    REQUIRE(w.append(b1.data(), static_cast<uint32_t>(b1.size())));
    REQUIRE(w.append(b2.data(), static_cast<uint32_t>(b2.size())));
  }
  SpmRecording r;
  std::string err;
  REQUIRE(read_recording(rec, &r, &err));
  REQUIRE(r.buffers.size() == 2);
  CHECK(r.header.version == 2);
  CHECK(r.info.device == "Test GPU (gfx IP 1.2.3)");
  REQUIRE(r.info.counters.size() == counters_per_sample(h));
  CHECK(r.info.counters[0].name == "GLOBAL_0");
  CHECK(r.info.counters[27].name == "GLOBAL_27");
  CHECK(r.info.counters[28].name == "SE0_0");
  CHECK(r.info.counters[59].name == "SE1_15");
  CHECK(r.info.counters[59].unit == "events/sample");
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
  opt.names = r.info.counters;
  const std::string csv = temp_path("out.csv"), json = temp_path("out.json"),
                    png = temp_path("out.png");
  REQUIRE(write_csv(csv, samples, opt, &err));
  const std::string c = slurp(csv);
  CHECK(std::count(c.begin(), c.end(), '\n') == 1 + 16);
  CHECK(c.rfind("xcc,timestamp,time_us,GLOBAL_0,GLOBAL_3,GLOBAL_5\n", 0) == 0);

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

  std::vector<std::string> pages;
  REQUIRE(write_png(png, samples, opt, {}, &pages, &err));
  CHECK(pages == std::vector<std::string>{png});
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

namespace {

// A layout with 2 global lines and 2 shader engines of 1 line: 28 + 2 * 16 = 60 counters.
SpmRecordingHeader small_layout(uint32_t xccs) {
  SpmRecordingHeader h{};
  h.num_xcc = xccs;
  h.global_lines = 2;
  h.se_lines = 1;
  h.shader_engines = 2;
  h.counter_freq_khz = 100000;  // 100 ticks per us
  return h;
}

// Known synthetic samples: `n` per XCC, one every 100 ticks from 5000, except those of XCC 0
// whose index is in [gap_from, gap_to) (lost). Counter c of sample k holds 1000 * c + k.
std::vector<Sample> known_samples(uint32_t xccs, uint32_t n, uint32_t gap_from = 0,
                                  uint32_t gap_to = 0) {
  std::vector<Sample> out;
  for (uint32_t k = 0; k < n; ++k)
    for (uint32_t x = 0; x < xccs; ++x) {
      if (x == 0 && k >= gap_from && k < gap_to) continue;
      Sample s{x, 5000 + uint64_t{k} * 100, std::vector<uint16_t>(60)};
      for (uint32_t c = 0; c < 60; ++c)
        s.counters[c] = static_cast<uint16_t>(1000 * c + k);
      out.push_back(std::move(s));
    }
  return out;
}

void write_file(const std::string &path, const std::string &bytes) {
  std::ofstream f(path, std::ios::binary);
  f << bytes;
}

}  // namespace

TEST_CASE("a version 1 recording still reads; its counters get the layout's names",
          "[spm][tools]") {
  const SpmRecordingHeader h = small_layout(2);
  const std::string rec = temp_path("v1.bin");
  const auto buf = make_buffer(h, 4, 1000, false);
  {
    SpmRecordingWriter w;
    REQUIRE(w.open_v1(rec, h));
    REQUIRE(w.append(buf.data(), static_cast<uint32_t>(buf.size())));
  }
  // Byte for byte what version 1 writers wrote: the 32-byte header, then the record.
  const std::string bytes = slurp(rec);
  REQUIRE(bytes.size() == 32 + 8 + buf.size());
  uint32_t version = 0;
  std::memcpy(&version, bytes.data() + 8, 4);
  CHECK(version == 1);
  SpmRecording r;
  std::string err;
  REQUIRE(read_recording(rec, &r, &err));
  CHECK(r.info.device.empty());
  REQUIRE(r.info.counters.size() == 60);
  CHECK(r.info.counters[0].name == "GLOBAL_0");
  CHECK(r.info.counters[44].name == "SE1_0");
  REQUIRE(r.buffers.size() == 1);
  CHECK(r.buffers[0] == buf);
  unlink(rec.c_str());
}

TEST_CASE("a recording whose names block does not fit its layout is refused", "[spm][tools]") {
  const SpmRecordingHeader h = small_layout(1);
  const std::string rec = temp_path("names.bin");
  std::string err;
  SpmRecordingWriter refuse;
  RecordingInfo short_info{"GPU", layout_counter_names(h)};
  short_info.counters.pop_back();
  errno = 0;
  CHECK_FALSE(refuse.open(rec, h, short_info));
  CHECK(errno == EINVAL);
  RecordingInfo bad_name{"GPU", layout_counter_names(h)};
  bad_name.counters[3].name = "has space";
  CHECK_FALSE(refuse.open(rec, h, bad_name));

  // Hand-made version 2 files: a header, then INFO and a JSON block.
  SpmRecordingHeader v2 = h;
  std::memcpy(v2.magic, kFileMagic, 8);
  v2.version = 2;
  auto file_with = [&](const std::string &json, uint32_t claimed) {
    std::string b(reinterpret_cast<const char *>(&v2), sizeof(v2));
    const uint32_t block[2] = {kInfoMagic, claimed};
    b.append(reinterpret_cast<const char *>(block), sizeof(block));
    return b + json;
  };
  nlohmann::json counters = nlohmann::json::array();
  for (const auto &c : layout_counter_names(h))
    counters.push_back({c.name, c.unit});
  const std::string good = nlohmann::json{{"device", "GPU"}, {"counters", counters}}.dump();
  SpmRecording r;
  write_file(rec, file_with(good, static_cast<uint32_t>(good.size())));
  REQUIRE(read_recording(rec, &r, &err));
  CHECK(r.info.device == "GPU");
  CHECK(r.info.counters.size() == 60);

  nlohmann::json fewer = counters;
  fewer.erase(fewer.size() - 1);
  const std::string cases[] = {
      nlohmann::json{{"device", "GPU"}, {"counters", fewer}}.dump(),  // one name short
      good.substr(0, good.size() / 2),                                // not JSON
      nlohmann::json{{"device", 7}, {"counters", counters}}.dump(),   // wrong type
  };
  for (const auto &json : cases) {
    SpmRecording bad;
    write_file(rec, file_with(json, static_cast<uint32_t>(json.size())));
    CHECK_FALSE(read_recording(rec, &bad, &err));
    CHECK(err == "corrupt counter names block");
  }
  SpmRecording lies;
  write_file(rec, file_with(good, static_cast<uint32_t>(good.size()) + 100));  // past the end
  CHECK_FALSE(read_recording(rec, &lies, &err));
  write_file(rec, file_with(good, 64u << 20));  // implausibly large
  CHECK_FALSE(read_recording(rec, &lies, &err));
  v2.version = 3;  // from the future
  write_file(rec, file_with(good, static_cast<uint32_t>(good.size())));
  CHECK_FALSE(read_recording(rec, &lies, &err));
  unlink(rec.c_str());
}

TEST_CASE("counters are selected by index, by name or all, and renamed from a file",
          "[spm][tools]") {
  const auto names = layout_counter_names(small_layout(1));
  std::vector<uint32_t> sel;
  std::string err;
  REQUIRE(select_counters({}, names, 8, &sel, &err));
  CHECK(sel == std::vector<uint32_t>{0, 1, 2, 3, 4, 5, 6, 7});
  REQUIRE(select_counters({"SE1_2", "3", "GLOBAL_3", "SE0_0"}, names, 8, &sel, &err));
  CHECK(sel == std::vector<uint32_t>{46, 3, 28});  // GLOBAL_3 is 3: kept once
  REQUIRE(select_counters({"all"}, names, 8, &sel, &err));
  CHECK(sel.size() == 60);
  CHECK_FALSE(select_counters({"60"}, names, 8, &sel, &err));
  CHECK(err == "counter 60 does not exist (a sample has 60)");
  CHECK_FALSE(select_counters({"TCP_HITS"}, names, 8, &sel, &err));
  CHECK(err == "no counter is named TCP_HITS");

  const std::string file = temp_path("names.txt");
  write_file(file,
             "# what the host programmed\n0 TCP_REQ requests/sample\n\n5 GL2C_MISS  # no unit\n");
  auto renamed = names;
  REQUIRE(read_counter_names(file, &renamed, &err));
  CHECK(renamed[0].name == "TCP_REQ");
  CHECK(renamed[0].unit == "requests/sample");
  CHECK(renamed[5].name == "GL2C_MISS");
  CHECK(renamed[5].unit == "events/sample");
  CHECK(renamed[1].name == "GLOBAL_1");
  for (const char *bad : {"60 TOO_FAR\n", "x NAME\n", "1 bad,name\n", "2\n"}) {
    write_file(file, bad);
    auto copy = names;
    CHECK_FALSE(read_counter_names(file, &copy, &err));
  }
  unlink(file.c_str());
}

TEST_CASE("the CSV and the trace name the selected counters, one trace process per XCC",
          "[spm][tools]") {
  const SpmRecordingHeader h = small_layout(2);
  // XCC 0 loses samples 10..14: a gap from sample 9 (ts 5900) to sample 15 (ts 6500).
  const auto samples = known_samples(2, 20, 10, 15);
  ExportOptions opt;
  opt.names = layout_counter_names(h);
  opt.device = "Test GPU";
  opt.counter_freq_khz = h.counter_freq_khz;
  std::string err;
  REQUIRE(select_counters({"SE0_1", "GLOBAL_2"}, opt.names, 8, &opt.counters, &err));

  const std::string csv = temp_path("names.csv"), json = temp_path("names.json");
  REQUIRE(write_csv(csv, samples, opt, &err));
  std::istringstream lines(slurp(csv));
  std::string line;
  std::getline(lines, line);
  CHECK(line == "xcc,timestamp,time_us,SE0_1,GLOBAL_2");
  std::getline(lines, line);
  CHECK(line == "0,5000,0.000,29000,2000");  // SE0_1 is counter 29; time from the first sample
  size_t rows = 1;
  while (std::getline(lines, line))
    ++rows;
  CHECK(rows == samples.size());

  REQUIRE(write_trace_json(json, samples, opt, &err));
  const auto doc = nlohmann::json::parse(slurp(json));
  // The Trace Event Format's documented fields: every event has a string name, a phase and an
  // integer pid; C (counter) and X (complete) events a numeric ts in us; X a dur and a tid;
  // M (metadata) events are process_name / process_sort_index / thread_name with their arg.
  std::map<std::pair<int, std::string>, std::vector<double>> tracks;  // (pid, name) -> ts
  std::map<int, std::string> process_names;
  std::map<int, int> sort_index;
  std::vector<nlohmann::json> slices;
  size_t malformed = 0;
  for (const auto &e : doc.at("traceEvents")) {
    if (!e.contains("name") || !e["name"].is_string() || !e.contains("ph") ||
        !e["ph"].is_string() || !e.contains("pid") || !e["pid"].is_number_integer()) {
      ++malformed;
      continue;
    }
    const std::string ph = e["ph"], name = e["name"];
    const int pid = e["pid"];
    if (ph == "M") {
      if (name == "process_name" && e["args"]["name"].is_string())
        process_names[pid] = e["args"]["name"];
      else if (name == "process_sort_index" && e["args"]["sort_index"].is_number_integer())
        sort_index[pid] = e["args"]["sort_index"];
      else if (!(name == "thread_name" && e["args"]["name"] == "data loss" && e.contains("tid")))
        ++malformed;
    } else if (ph == "C") {
      if (!e["ts"].is_number() || e["ts"] < 0 || e["args"].size() != 1 ||
          !e["args"]["value"].is_number())
        ++malformed;
      else
        tracks[{pid, name}].push_back(e["ts"]);
    } else if (ph == "X") {
      if (!e["ts"].is_number() || !e["dur"].is_number() || e["dur"] < 0 || !e.contains("tid"))
        ++malformed;
      else
        slices.push_back(e);
    } else {
      ++malformed;
    }
  }
  CHECK(malformed == 0);
  CHECK(process_names ==
        std::map<int, std::string>{{1, "SPM XCC 0, Test GPU"}, {2, "SPM XCC 1, Test GPU"}});
  CHECK(sort_index == std::map<int, int>{{1, 0}, {2, 1}});
  REQUIRE(tracks.size() == 4);
  CHECK(tracks[{1, "SE0_1"}].size() == 15);
  CHECK(tracks[{1, "GLOBAL_2"}].size() == 15);
  CHECK(tracks[{2, "SE0_1"}].size() == 20);
  CHECK(tracks[{2, "GLOBAL_2"}].size() == 20);
  CHECK(tracks[{2, "GLOBAL_2"}].front() == 0.0);
  CHECK(tracks[{2, "GLOBAL_2"}].back() == 19.0);  // 19 * 100 ticks at 100 ticks per us
  REQUIRE(slices.size() == 1);
  CHECK(slices[0]["pid"] == 1);
  CHECK(slices[0]["ts"] == 9.0);
  CHECK(slices[0]["dur"] == 6.0);
  CHECK(doc["otherData"]["units"] ==
        nlohmann::json{{"SE0_1", "events/sample"}, {"GLOBAL_2", "events/sample"}});

  // --xcc 1: only that XCC's process and rows.
  opt.xcc = 1;
  REQUIRE(write_trace_json(json, samples, opt, &err));
  size_t pid1 = 0, pid2 = 0;
  const auto only1 = nlohmann::json::parse(slurp(json));
  for (const auto &e : only1.at("traceEvents"))
    (e["pid"] == 1 ? pid1 : pid2) += e["ph"] == "C";
  CHECK(pid1 == 0);
  CHECK(pid2 == 2 * 20);
  for (const auto &f : {csv, json})
    unlink(f.c_str());
}

TEST_CASE("time runs from the first sample in a unit chosen by the span; gaps are found",
          "[spm][tools]") {
  auto at = [](std::vector<uint64_t> ts) {
    std::vector<Sample> s;
    for (uint64_t t : ts)
      s.push_back({0, t, {}});
    return s;
  };
  TimeAxis a = choose_time_axis(at({1000, 1000 + 199900}), {}, 100000);  // 1999 us
  CHECK(a.unit == "us");
  CHECK(a.t0 == 1000);
  CHECK(a.span == Approx(1999.0));
  a = choose_time_axis(at({0, 200000}), {}, 100000);  // 2 ms
  CHECK(a.unit == "ms");
  CHECK(a.span == Approx(2.0));
  a = choose_time_axis(at({0, 300000000}), {}, 100000);  // 3 s
  CHECK(a.unit == "s");
  CHECK(a.span == Approx(3.0));

  const auto samples = known_samples(2, 30, 5, 7);
  const auto gaps = find_gaps(samples, 0);
  REQUIRE(gaps.size() == 1);
  CHECK(gaps[0].from == 5400);
  CHECK(gaps[0].to == 5700);
  CHECK(find_gaps(samples, 1).empty());
}

TEST_CASE("the summary gives min, median, max and the mean rate per counter", "[spm][tools]") {
  const SpmRecordingHeader h = small_layout(1);
  const auto samples = known_samples(1, 11);  // counter c: 1000 c + 0..10, every 100 ticks
  const CounterStats st = counter_stats(samples, 0, 2, h.counter_freq_khz);
  CHECK(st.samples == 11);
  CHECK(st.min == 2000);
  CHECK(st.median == 2005);
  CHECK(st.max == 2010);
  CHECK(st.mean == 2005);
  CHECK(st.per_second == Approx(2005.0 * 1e6));  // a sample per us
  ExportOptions opt;
  opt.names = layout_counter_names(h);
  opt.counter_freq_khz = h.counter_freq_khz;
  opt.counters = {2, 30};
  CHECK(summary_text(samples, opt) ==
        "XCC 0: 11 samples over 10.000 us, 0 interval(s) without samples\n"
        "  counter  unit                min   median      max         mean/s\n"
        "  GLOBAL_2 events/sample      2000   2005.0     2010     2005000000\n"
        "  SE0_2    events/sample     30000  30005.0    30010    30005000000\n");
}
