// Issue 17: rvgl-spm renders a recording of known synthetic counters into pages of one panel per
// counter. The PNG is decoded (libpng) and checked where page_layout() says each panel's plot
// area is: the page size, a line in every panel from the left edge to the right (the x range is
// fitted to the data), the gap shaded, one colour per XCC; and the CSV, the trace JSON and the
// summary name exactly the counters selected.
#include <catch2/catch.hpp>
#include <png.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <map>
#include <set>
#include <sstream>

#include "rocm_virgl_protocol.h"
#include "run_program.h"
#include "spm_counters.h"
#include "spm_plot.h"
#include "spm_recording.h"

using namespace rvgl::spm;
using rvgl::tools_test::path_from_env;
using rvgl::tools_test::run_program;
namespace fs = std::filesystem;

namespace {

struct Dir {
  std::string path;
  Dir() {
    std::string t = (fs::temp_directory_path() / "rvgl-spm-png-XXXXXX").string();
    REQUIRE(mkdtemp(t.data()));
    path = t;
  }
  ~Dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

std::string slurp(const std::string &p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// Counter c of sample k (k counts samples from the stream's start, lost ones included).
uint16_t value(uint32_t xcc, uint64_t k, uint32_t c) {
  switch (c) {
    case 0:
      return 500;  // FLAT
    case 1:
      return static_cast<uint16_t>(10 * k + 400 * xcc);  // RAMP, apart per XCC
    case 2:
      return (k / 20) % 2 ? 1000 : 0;  // SQUARE
    default:
      return static_cast<uint16_t>(100 + (k * 7 + c) % 50);
  }
}

constexpr uint32_t kGapFrom = 50, kGapTo = 60, kSamples = 100;  // samples 50..59 are lost

// The layout: 1 global line (12 counters) and 2 shader engines of 1 line: 44 counters.
SpmRecordingHeader layout() {
  SpmRecordingHeader h{};
  h.num_xcc = 2;
  h.global_lines = 1;
  h.se_lines = 1;
  h.shader_engines = 2;
  h.counter_freq_khz = 100000;  // a sample every 100 ticks = 1 us
  return h;
}

// One destination buffer holding samples [from, to) on every XCC.
std::vector<uint8_t> buffer(const SpmRecordingHeader &h, uint64_t from, uint64_t to, bool loss) {
  const uint32_t lines = lines_per_sample(h), n = static_cast<uint32_t>(to - from);
  const size_t slice = 32 + size_t{n} * lines * 32;
  std::vector<uint8_t> buf(slice * h.num_xcc);
  for (uint32_t x = 0; x < h.num_xcc; ++x) {
    uint8_t *s = buf.data() + x * slice;
    rvgl_spm_buffer_header hdr{};
    hdr.version = 1u << 24;
    hdr.bytes_copied = n * lines * 32;
    hdr.has_data_loss = loss;
    std::memcpy(s, &hdr, sizeof(hdr));
    for (uint64_t k = from; k < to; ++k) {
      auto *u = reinterpret_cast<uint16_t *>(s + 32 + (k - from) * lines * 32);
      const uint64_t ts = 7000000 + k * 100;
      std::memcpy(u, &ts, 8);
      for (uint32_t c = 0; c < lines * 16 - 4; ++c)
        u[4 + c] = value(x, k, c);
    }
  }
  return buf;
}

// A recording made on "Test GPU" whose first three counters are named FLAT, RAMP and SQUARE.
std::string write_recording(const std::string &dir) {
  const SpmRecordingHeader h = layout();
  RecordingInfo info{"Test GPU (gfx IP 1.2.3)", layout_counter_names(h)};
  info.counters[0] = {"FLAT", "waves"};
  info.counters[1] = {"RAMP", "bytes/sample"};
  info.counters[2] = {"SQUARE", "events/sample"};
  const std::string path = dir + "/rec.bin";
  SpmRecordingWriter w;
  REQUIRE(w.open(path, h, info));
  const auto a = buffer(h, 0, kGapFrom, false), b = buffer(h, kGapTo, kSamples, true);
  REQUIRE(w.append(a.data(), static_cast<uint32_t>(a.size())));
  REQUIRE(w.append(b.data(), static_cast<uint32_t>(b.size())));
  return path;
}

struct Image {
  int width = 0, height = 0;
  std::vector<uint8_t> rgb;
  const uint8_t *at(int x, int y) const { return &rgb[(size_t{unsigned(y)} * width + x) * 3]; }
};

Image read_png(const std::string &path) {
  png_image img;
  std::memset(&img, 0, sizeof(img));
  img.version = PNG_IMAGE_VERSION;
  REQUIRE(png_image_begin_read_from_file(&img, path.c_str()));
  img.format = PNG_FORMAT_RGB;
  Image out;
  out.width = static_cast<int>(img.width);
  out.height = static_cast<int>(img.height);
  out.rgb.resize(PNG_IMAGE_SIZE(img));
  REQUIRE(png_image_finish_read(&img, nullptr, out.rgb.data(), 0, nullptr));
  return out;
}

uint32_t rgb(const char *hex) {
  return static_cast<uint32_t>(std::stoul(hex + (hex[0] == '#'), nullptr, 16));
}
bool near(const uint8_t *p, uint32_t colour, int tolerance) {
  const int d = std::abs(p[0] - int(colour >> 16)) + std::abs(p[1] - int((colour >> 8) & 255)) +
                std::abs(p[2] - int(colour & 255));
  return d <= tolerance;
}

// The columns of panel `k`'s plot area holding a pixel of `colour`.
std::set<int> columns_with(const Image &im, const PageLayout &L, size_t k, uint32_t colour,
                           int tolerance = 30) {
  std::set<int> cols;
  for (int y = L.panels[k].top + 1; y < L.panels[k].bottom - 1; ++y)
    for (int x = L.left + 1; x < L.right - 1; ++x)
      if (near(im.at(x, y), colour, tolerance)) cols.insert(x);
  return cols;
}

int rows_with(const Image &im, const PageLayout &L, size_t k, int x, uint32_t colour) {
  int n = 0;
  for (int y = L.panels[k].top + 1; y < L.panels[k].bottom - 1; ++y)
    n += near(im.at(x, y), colour, 6);
  return n;
}

// The plot-area column of time t (us from the first sample) on a fitted 0..99 us axis.
int column_of(const PageLayout &L, double t) {
  return L.left + static_cast<int>(t / (kSamples - 1) * (L.right - L.left));
}

bool have_programs(std::string *why) {
  if (path_from_env("RVGL_SPM_BIN").empty()) {
    *why = "RVGL_SPM_BIN is not set (run through meson test)";
    return false;
  }
  return true;
}

}  // namespace

TEST_CASE("each panel of the PNG shows its counter across the fitted time axis, gap shaded",
          "[tools][spm][png]") {
  std::string why;
  if (!have_programs(&why)) FAIL(why);
  Dir dir;
  const std::string rec = write_recording(dir.path), png = dir.path + "/xcc0.png";
  const auto r = run_program({path_from_env("RVGL_SPM_BIN"), rec, "--png", png, "--counters",
                              "FLAT", "RAMP", "SQUARE", "SE1_15"});
  INFO(r.out << r.err);
  REQUIRE(r.exit_status == 0);
  CHECK(r.err.empty());  // a selection that fits one page: nothing to say
  const Image im = read_png(png);
  const PageLayout L = page_layout(4);
  CHECK(im.width == 1200);
  CHECK(im.width == L.width);
  CHECK(im.height == L.height);

  const uint32_t smooth = rgb("#1f4e8c"), shade = rgb("#f6cfcb");
  const int gap_mid = column_of(L, (kGapFrom - 1 + kGapTo) / 2.0);
  const int gap_lo = column_of(L, kGapFrom - 1), gap_hi = column_of(L, kGapTo);
  for (size_t k = 0; k < 4; ++k) {
    INFO("panel " << k);
    const std::set<int> line = columns_with(im, L, k, smooth);
    REQUIRE_FALSE(line.empty());  // not blank
    // Fitted: the line starts at the left edge and ends at the right one...
    CHECK(*line.begin() <= L.left + 3);
    CHECK(*line.rbegin() >= L.right - 4);
    // ...and is drawn over every column but the gap's.
    size_t outside_gap = 0, inside_gap = 0;
    for (int x : line)
      (x > gap_lo + 2 && x < gap_hi - 2 ? inside_gap : outside_gap) += 1;
    CHECK(inside_gap == 0);
    CHECK(outside_gap >= size_t(L.right - L.left - (gap_hi - gap_lo)) * 9 / 10);
    // The gap is shaded over (nearly) the panel's height; a column of data is not.
    CHECK(rows_with(im, L, k, gap_mid, shade) >= (L.panels[k].bottom - L.panels[k].top) * 8 / 10);
    CHECK(rows_with(im, L, k, column_of(L, 20), shade) == 0);
  }
  // FLAT is one horizontal line: its smoothed line stays in a band a few pixels high.
  std::set<int> flat_rows;
  for (int y = L.panels[0].top; y < L.panels[0].bottom; ++y)
    if (near(im.at(column_of(L, 20), y), smooth, 30)) flat_rows.insert(y);
  CHECK(flat_rows.size() <= 4);
  CHECK_FALSE(flat_rows.empty());
}

TEST_CASE("rvgl-spm --xcc all draws each XCC in its own colour", "[tools][spm][png]") {
  std::string why;
  if (!have_programs(&why)) FAIL(why);
  Dir dir;
  const std::string rec = write_recording(dir.path), png = dir.path + "/all.png";
  const auto r = run_program(
      {path_from_env("RVGL_SPM_BIN"), rec, "--png", png, "--xcc", "all", "--counters", "RAMP"});
  INFO(r.out << r.err);
  REQUIRE(r.exit_status == 0);
  const Image im = read_png(png);
  const PageLayout L = page_layout(1);
  CHECK(im.height == L.height);
  // The palette's first two colours (spm_plot.cpp) for XCC 0 and XCC 1.
  CHECK(columns_with(im, L, 0, rgb("#1f77b4")).size() > size_t(L.right - L.left) / 2);
  CHECK(columns_with(im, L, 0, rgb("#d62728")).size() > size_t(L.right - L.left) / 2);
  // --xcc 1 alone: the single-XCC colours, not the palette's.
  const std::string one = dir.path + "/one.png";
  REQUIRE(run_program({path_from_env("RVGL_SPM_BIN"), rec, "--png", one, "--xcc", "1", "--counters",
                       "RAMP"})
              .exit_status == 0);
  const Image im1 = read_png(one);
  CHECK(columns_with(im1, L, 0, rgb("#d62728"), 6).empty());
  CHECK_FALSE(columns_with(im1, L, 0, rgb("#1f4e8c")).empty());
  CHECK(run_program({path_from_env("RVGL_SPM_BIN"), rec, "--png", one, "--xcc", "2"}).exit_status ==
        2);  // the recording has XCCs 0 and 1
}

TEST_CASE("a selection that does not fit one page goes on several, said on stderr",
          "[tools][spm][png]") {
  std::string why;
  if (!have_programs(&why)) FAIL(why);
  Dir dir;
  const std::string rec = write_recording(dir.path), png = dir.path + "/paged.png";
  const auto r = run_program({path_from_env("RVGL_SPM_BIN"), rec, "--png", png, "--counters", "0",
                              "1", "2", "3", "4", "5", "--panels-per-page", "4"});
  INFO(r.out << r.err);
  REQUIRE(r.exit_status == 0);
  const std::string second = dir.path + "/paged-2.png";
  CHECK(r.err == "rvgl-spm: 6 counters do not fit one page of 4 panels: wrote 2 pages: " + png +
                     ", " + second + " (--counters selects fewer, --panels-per-page fits more)\n");
  const Image p1 = read_png(png), p2 = read_png(second);
  CHECK(p1.height == page_layout(4).height);
  CHECK(p2.height == page_layout(2).height);
  const PageLayout L2 = page_layout(2);
  for (size_t k = 0; k < 2; ++k)
    CHECK_FALSE(columns_with(p2, L2, k, rgb("#1f4e8c")).empty());
  CHECK_FALSE(fs::exists(dir.path + "/paged-3.png"));

  // Without --counters: the first 8 of 44, and stderr says how to choose.
  const auto d = run_program({path_from_env("RVGL_SPM_BIN"), rec, "--png", png});
  CHECK(d.exit_status == 0);
  CHECK(d.err ==
        "rvgl-spm: 44 counters per sample; exporting the first 8 (FLAT RAMP SQUARE GLOBAL_3 "
        "GLOBAL_4 GLOBAL_5 GLOBAL_6 GLOBAL_7); choose others with --counters (indices, names or "
        "'all')\n");
  CHECK(read_png(png).height == page_layout(8).height);
}

TEST_CASE("rvgl-spm's CSV, trace and summary name exactly the selected counters", "[tools][spm]") {
  std::string why;
  if (!have_programs(&why)) FAIL(why);
  Dir dir;
  const std::string rec = write_recording(dir.path);
  const std::string csv = dir.path + "/s.csv", json = dir.path + "/s.json";
  const auto r = run_program({path_from_env("RVGL_SPM_BIN"), rec, "--csv", csv, "--trace", json,
                              "--summary", "--counters", "SQUARE", "FLAT", "SE0_3"});
  INFO(r.out << r.err);
  REQUIRE(r.exit_status == 0);
  std::istringstream lines(slurp(csv));
  std::string head, first;
  std::getline(lines, head);
  std::getline(lines, first);
  CHECK(head == "xcc,timestamp,time_us,SQUARE,FLAT,SE0_3");
  // XCC 0's first sample: SQUARE 0, FLAT 500, SE0_3 (counter 12 + 3) 100 + 15.
  CHECK(first == "0,7000000,0.000,0,500,115");
  size_t rows = 1;
  for (std::string l; std::getline(lines, l);)
    ++rows;
  CHECK(rows == 2 * (kSamples - (kGapTo - kGapFrom)));

  const auto doc = nlohmann::json::parse(slurp(json));
  std::map<std::pair<int, std::string>, size_t> tracks;
  std::vector<std::pair<double, double>> lost;
  for (const auto &e : doc.at("traceEvents")) {
    if (e.at("ph") == "C") ++tracks[{e.at("pid"), e.at("name")}];
    if (e.at("ph") == "X") lost.emplace_back(e.at("ts"), e.at("dur"));
  }
  const size_t kept = kSamples - (kGapTo - kGapFrom);
  CHECK(tracks == std::map<std::pair<int, std::string>, size_t>{{{1, "SQUARE"}, kept},
                                                                {{1, "FLAT"}, kept},
                                                                {{1, "SE0_3"}, kept},
                                                                {{2, "SQUARE"}, kept},
                                                                {{2, "FLAT"}, kept},
                                                                {{2, "SE0_3"}, kept}});
  // Both XCCs lost samples 50..59: no samples from sample 49 (49 us) to sample 60 (60 us).
  CHECK(lost == std::vector<std::pair<double, double>>{{49.0, 11.0}, {49.0, 11.0}});
  CHECK(doc.at("otherData").at("units") ==
        nlohmann::json{{"SQUARE", "events/sample"}, {"FLAT", "waves"}, {"SE0_3", "events/sample"}});

  // stdout: the decode line, then per XCC a header and one line per counter, in selection order.
  std::istringstream out(r.out);
  std::vector<std::string> got;
  for (std::string l; std::getline(out, l);)
    got.push_back(l);
  REQUIRE(got.size() == 1 + 2 * 5);
  CHECK(got[0] ==
        "Test GPU (gfx IP 1.2.3): 2 buffers, 4 slices (2 with data loss), 180 samples, 17280 "
        "bytes, 44 counters/sample");
  CHECK(got[1] == "XCC 0: 90 samples over 99.000 us, 1 interval(s) without samples");
  auto words = [](const std::string &l) {
    std::istringstream in(l);
    std::vector<std::string> w;
    for (std::string x; in >> x;)
      w.push_back(x);
    return w;
  };
  CHECK(words(got[2]) ==
        std::vector<std::string>{"counter", "unit", "min", "median", "max", "mean/s"});
  // SQUARE: 0 for samples 0..19, 40..49 and 80..99 (50 kept), 1000 for 20..39 and 60..79 (40):
  // median 0, mean 40000 / 90. A sample per us: a mean of m per sample is m * 1e6 per second.
  CHECK(words(got[3]) ==
        std::vector<std::string>{"SQUARE", "events/sample", "0", "0.0", "1000", "444444444"});
  CHECK(words(got[4]) ==
        std::vector<std::string>{"FLAT", "waves", "500", "500.0", "500", "500000000"});
  CHECK(words(got[6]) == std::vector<std::string>{"XCC", "1:", "90", "samples", "over", "99.000",
                                                  "us,", "1", "interval(s)", "without", "samples"});
}

TEST_CASE("a version 1 recording renders, its counters named for the layout", "[tools][spm]") {
  std::string why;
  if (!have_programs(&why)) FAIL(why);
  Dir dir;
  const SpmRecordingHeader h = layout();
  const std::string rec = dir.path + "/v1.bin", csv = dir.path + "/v1.csv";
  {
    SpmRecordingWriter w;
    REQUIRE(w.open_v1(rec, h));
    const auto a = buffer(h, 0, 10, false);
    REQUIRE(w.append(a.data(), static_cast<uint32_t>(a.size())));
  }
  const auto r = run_program({path_from_env("RVGL_SPM_BIN"), rec, "--csv", csv, "--png",
                              dir.path + "/v1.png", "--counters", "0", "SE1_0"});
  INFO(r.out << r.err);
  REQUIRE(r.exit_status == 0);
  std::istringstream lines(slurp(csv));
  std::string head;
  std::getline(lines, head);
  CHECK(head == "xcc,timestamp,time_us,GLOBAL_0,SE1_0");
  CHECK(read_png(dir.path + "/v1.png").height == page_layout(2).height);
}

TEST_CASE("rvgl-spm says when timestamps go back (the stream lost its alignment)", "[tools][spm]") {
  std::string why;
  if (!have_programs(&why)) FAIL(why);
  Dir dir;
  const SpmRecordingHeader h = layout();
  const std::string rec = dir.path + "/back.bin";
  {
    SpmRecordingWriter w;
    REQUIRE(w.open(rec, h, {"GPU", layout_counter_names(h)}));
    const auto later = buffer(h, 10, 20, false), earlier = buffer(h, 0, 5, false);
    REQUIRE(w.append(later.data(), static_cast<uint32_t>(later.size())));
    REQUIRE(w.append(earlier.data(), static_cast<uint32_t>(earlier.size())));
  }
  const auto r = run_program(
      {path_from_env("RVGL_SPM_BIN"), rec, "--csv", dir.path + "/back.csv", "--counters", "0"});
  CHECK(r.exit_status == 0);
  // One per XCC: the first sample of the second buffer.
  CHECK(r.err ==
        "rvgl-spm: 2 samples are not newer than the one before them on their XCC: the stream "
        "lost its sample alignment (a loss inside a sample?), and what follows is not "
        "meaningful\n");
}
