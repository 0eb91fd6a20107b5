// rvgl-spm: turns a recorded SPM stream (the demo's `spm` mode) into CSV, a Perfetto/Chrome
// trace-event JSON, a PNG of one panel per counter, and a summary per counter.
#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <charconv>

#include "spm_counters.h"
#include "spm_decode.h"
#include "spm_export.h"
#include "spm_plot.h"
#include "spm_recording.h"
#include "spm_summary.h"

namespace {

constexpr size_t kDefaultCounters = 8;

std::string join_names(const rvgl::spm::ExportOptions &opt, const std::vector<uint32_t> &sel) {
  std::string s;
  for (uint32_t c : sel)
    s += (s.empty() ? "" : " ") + opt.names[c].name;
  return s;
}

}  // namespace

int main(int argc, char **argv) {
  CLI::App app{"Convert a recorded SPM stream into CSV, trace JSON, PNG and a summary"};
  std::string input, csv, trace, png, names_file, xcc_arg;
  std::vector<std::string> counters;
  bool summary = false;
  rvgl::spm::PlotOptions plot;
  app.add_option("recording", input, "recording written by rvgl-demo spm")->required();
  app.add_option("--csv", csv, "write samples as CSV");
  app.add_option("--trace", trace, "write a Chrome/Perfetto trace-event JSON");
  app.add_option("--png", png, "plot one panel per counter (needs gnuplot)");
  app.add_flag("--summary", summary, "print min/median/max and mean per second per counter");
  app.add_option("--counters", counters,
                 "counters to export: indices, names or 'all' (default: the first 8)");
  app.add_option("--xcc", xcc_arg,
                 "N or 'all': the XCC(s) exported (default: every XCC; the PNG: XCC 0)");
  app.add_option("--names", names_file, "counter names file: lines 'INDEX NAME [UNIT]'");
  app.add_option("--panels-per-page", plot.panels_per_page, "PNG panels per page")
      ->check(CLI::Range(1, 32));
  CLI11_PARSE(app, argc, argv);

  rvgl::spm::SpmRecording rec;
  std::string err;
  if (!rvgl::spm::read_recording(input, &rec, &err)) {
    fmt::print(stderr, "rvgl-spm: {}\n", err);
    return 1;
  }
  if (!names_file.empty() && !rvgl::spm::read_counter_names(names_file, &rec.info.counters, &err)) {
    fmt::print(stderr, "rvgl-spm: {}\n", err);
    return 2;
  }
  rvgl::spm::ExportOptions opt;
  opt.names = rec.info.counters;
  opt.device = rec.info.device;
  opt.counter_freq_khz = rec.header.counter_freq_khz;
  if (xcc_arg == "all") {
    plot.all_xccs = true;
  } else if (!xcc_arg.empty()) {
    uint32_t x = 0;
    const auto [p, ec] = std::from_chars(xcc_arg.data(), xcc_arg.data() + xcc_arg.size(), x);
    if (ec != std::errc() || p != xcc_arg.data() + xcc_arg.size() || x >= rec.header.num_xcc) {
      fmt::print(stderr, "rvgl-spm: --xcc takes 'all' or 0..{}\n", rec.header.num_xcc - 1);
      return 2;
    }
    opt.xcc = x;
  }
  if (!rvgl::spm::select_counters(counters, opt.names, kDefaultCounters, &opt.counters, &err)) {
    fmt::print(stderr, "rvgl-spm: {}\n", err);
    return 2;
  }

  std::vector<rvgl::spm::Sample> samples;
  rvgl::spm::DecodeStats stats;
  rvgl::spm::StreamState stream;  // samples may straddle consecutive buffers
  for (const auto &b : rec.buffers) {
    if (!rvgl::spm::decode_buffer(rec.header, b, &samples, &stats, &err, &stream)) {
      fmt::print(stderr, "rvgl-spm: buffer {}: {}\n", stats.buffers, err);
      return 1;
    }
  }
  fmt::print(
      "{}{} buffers, {} slices ({} with data loss), {} samples, {} bytes, {} counters/sample\n",
      rec.info.device.empty() ? "" : rec.info.device + ": ", stats.buffers, stats.slices,
      stats.slices_with_loss, stats.samples, stats.bytes, opt.names.size());
  if (stats.timestamp_regressions)
    fmt::print(stderr,
               "rvgl-spm: {} samples are not newer than the one before them on their XCC: the "
               "stream lost its sample alignment (a loss inside a sample?), and what follows is "
               "not meaningful\n",
               stats.timestamp_regressions);
  if (counters.empty() && opt.names.size() > kDefaultCounters)
    fmt::print(stderr,
               "rvgl-spm: {} counters per sample; exporting the first {} ({}); choose others "
               "with --counters (indices, names or 'all')\n",
               opt.names.size(), kDefaultCounters, join_names(opt, opt.counters));

  bool ok = true;
  if (!csv.empty()) ok &= rvgl::spm::write_csv(csv, samples, opt, &err);
  if (ok && !trace.empty()) ok &= rvgl::spm::write_trace_json(trace, samples, opt, &err);
  if (ok && !png.empty()) {
    std::vector<std::string> pages;
    ok &= rvgl::spm::write_png(png, samples, opt, plot, &pages, &err);
    if (ok && pages.size() > 1) {
      std::string list;
      for (const auto &p : pages)
        list += (list.empty() ? "" : ", ") + p;
      fmt::print(stderr,
                 "rvgl-spm: {} counters do not fit one page of {} panels: wrote {} pages: {} "
                 "(--counters selects fewer, --panels-per-page fits more)\n",
                 opt.counters.size(), plot.panels_per_page, pages.size(), list);
    }
  }
  if (ok && summary) fmt::print("{}", rvgl::spm::summary_text(samples, opt));
  if (!ok) fmt::print(stderr, "rvgl-spm: {}\n", err);
  return ok ? 0 : 1;
}
