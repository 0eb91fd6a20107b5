// rvgl-spm: turns a recorded SPM stream (the demo's `spm` mode) into CSV, a Perfetto/Chrome
// trace-event JSON and a PNG plot.
#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include "spm_decode.h"
#include "spm_export.h"
#include "spm_recording.h"

int main(int argc, char **argv) {
  CLI::App app{"Convert a recorded SPM stream into CSV, trace JSON and PNG"};
  std::string input, csv, trace, png;
  std::vector<uint32_t> counters;
  app.add_option("recording", input, "recording written by rvgl-demo spm")->required();
  app.add_option("--csv", csv, "write samples as CSV");
  app.add_option("--trace", trace, "write a Chrome/Perfetto trace-event JSON");
  app.add_option("--png", png, "plot the counters of XCC 0 (needs gnuplot)");
  app.add_option("--counters", counters, "counter indices to export (default: first 8)");
  CLI11_PARSE(app, argc, argv);

  rvgl::spm::SpmRecording rec;
  std::string err;
  if (!rvgl::spm::read_recording(input, &rec, &err)) {
    fmt::print(stderr, "rvgl-spm: {}\n", err);
    return 1;
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
      "{} buffers, {} slices ({} with data loss), {} samples, {} bytes, {} counters/sample\n",
      stats.buffers, stats.slices, stats.slices_with_loss, stats.samples, stats.bytes,
      rvgl::spm::counters_per_sample(rec.header));
  rvgl::spm::ExportOptions opt;
  opt.counters = counters;
  opt.counter_freq_khz = rec.header.counter_freq_khz;
  bool ok = true;
  if (!csv.empty()) ok &= rvgl::spm::write_csv(csv, samples, opt, &err);
  if (ok && !trace.empty()) ok &= rvgl::spm::write_trace_json(trace, samples, opt, &err);
  if (ok && !png.empty()) ok &= rvgl::spm::write_png(png, samples, opt, &err);
  if (!ok) fmt::print(stderr, "rvgl-spm: {}\n", err);
  return ok ? 0 : 1;
}
