#include "spm_export.h"

#include <fmt/core.h>
#include <fmt/os.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "spm_series.h"

namespace rvgl::spm {

namespace {

// Trace-event JSON process ids: XCC n is pid n + 1, so that no XCC is given pid 0 (no real
// process has it, and a reader may take it for "no pid").
int pid_of(uint32_t xcc) {
  return static_cast<int>(xcc) + 1;
}
constexpr int kLossThread = 1;

}  // namespace

std::vector<uint32_t> selected_counters(const ExportOptions &opt, size_t available) {
  std::vector<uint32_t> out;
  if (opt.counters.empty()) {
    for (uint32_t i = 0; i < 8 && i < available; ++i)
      out.push_back(i);
  } else {
    for (uint32_t c : opt.counters)
      if (c < available) out.push_back(c);
  }
  return out;
}

const CounterInfo &counter_info(const ExportOptions &opt, uint32_t counter, CounterInfo *storage) {
  if (counter < opt.names.size()) return opt.names[counter];
  *storage = {fmt::format("c{}", counter), std::string(kPerSampleUnit)};
  return *storage;
}

std::vector<Sample> filter_xcc(const std::vector<Sample> &samples, const ExportOptions &opt) {
  if (!opt.xcc) return samples;
  std::vector<Sample> out;
  for (const auto &s : samples)
    if (s.xcc == *opt.xcc) out.push_back(s);
  return out;
}

bool write_csv(const std::string &path, const std::vector<Sample> &all, const ExportOptions &opt,
               std::string *error) {
  const std::vector<Sample> samples = filter_xcc(all, opt);
  const auto sel = selected_counters(opt, samples.empty() ? 0 : samples[0].counters.size());
  const TimeAxis t = choose_time_axis(samples, {}, opt.counter_freq_khz);
  const double ticks_per_us = opt.counter_freq_khz ? opt.counter_freq_khz / 1000.0 : 1.0;
  try {
    auto out = fmt::output_file(path);
    out.print("xcc,timestamp,time_us");
    CounterInfo tmp;
    for (uint32_t c : sel)
      out.print(",{}", counter_info(opt, c, &tmp).name);
    out.print("\n");
    for (const auto &s : samples) {
      out.print("{},{},{:.3f}", s.xcc, s.timestamp,
                static_cast<double>(s.timestamp - t.t0) / ticks_per_us);
      for (uint32_t c : sel)
        out.print(",{}", s.counters[c]);
      out.print("\n");
    }
  } catch (const std::exception &e) {
    *error = e.what();
    return false;
  }
  return true;
}

bool write_trace_json(const std::string &path, const std::vector<Sample> &all,
                      const ExportOptions &opt, std::string *error) {
  const std::vector<Sample> samples = filter_xcc(all, opt);
  const auto sel = selected_counters(opt, samples.empty() ? 0 : samples[0].counters.size());
  const TimeAxis t = choose_time_axis(samples, {}, opt.counter_freq_khz);
  const double ticks_per_us = opt.counter_freq_khz ? opt.counter_freq_khz / 1000.0 : 1.0;
  auto us = [&](uint64_t ticks) { return static_cast<double>(ticks - t.t0) / ticks_per_us; };

  // The Trace Event Format (Google's "Trace Event Format" document, the catapult trace viewer's
  // input): "M" metadata events process_name / process_sort_index / thread_name name and order
  // the processes; "C" counter events are process-local, one track per name, a series per args
  // key; "X" complete events carry ts and dur; every ts is in microseconds.
  nlohmann::json events = nlohmann::json::array();
  const std::string suffix = opt.device.empty() ? "" : ", " + opt.device;
  for (uint32_t x : xccs_present(samples)) {
    events.push_back({{"name", "process_name"},
                      {"ph", "M"},
                      {"pid", pid_of(x)},
                      {"args", {{"name", fmt::format("SPM XCC {}{}", x, suffix)}}}});
    events.push_back({{"name", "process_sort_index"},
                      {"ph", "M"},
                      {"pid", pid_of(x)},
                      {"args", {{"sort_index", x}}}});
    const auto gaps = find_gaps(samples, x);
    if (gaps.empty()) continue;
    events.push_back({{"name", "thread_name"},
                      {"ph", "M"},
                      {"pid", pid_of(x)},
                      {"tid", kLossThread},
                      {"args", {{"name", "data loss"}}}});
    for (const Gap &g : gaps)
      events.push_back({{"name", "no samples"},
                        {"cat", "spm"},
                        {"ph", "X"},
                        {"pid", pid_of(x)},
                        {"tid", kLossThread},
                        {"ts", us(g.from)},
                        {"dur", us(g.to) - us(g.from)}});
  }
  // Counter events: a track per (process, name); the value is the "value" series.
  CounterInfo tmp;
  for (const auto &s : samples)
    for (uint32_t c : sel)
      events.push_back({{"name", counter_info(opt, c, &tmp).name},
                        {"ph", "C"},
                        {"pid", pid_of(s.xcc)},
                        {"ts", us(s.timestamp)},
                        {"args", {{"value", s.counters[c]}}}});
  nlohmann::json units = nlohmann::json::object();
  for (uint32_t c : sel) {
    const CounterInfo &ci = counter_info(opt, c, &tmp);
    units[ci.name] = ci.unit;
  }
  nlohmann::json doc = {
      {"traceEvents", std::move(events)},
      {"displayTimeUnit", "ms"},
      {"otherData",
       {{"device", opt.device},
        {"first_sample_ticks", t.t0},
        {"counter_freq_khz", opt.counter_freq_khz},
        {"units", units}}},
  };
  FILE *f = std::fopen(path.c_str(), "we");
  if (!f) {
    *error = "cannot create " + path;
    return false;
  }
  const std::string text = doc.dump();
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  std::fclose(f);
  if (!ok) *error = "write failed";
  return ok;
}

}  // namespace rvgl::spm
