#include "spm_export.h"

#include <fmt/core.h>
#include <fmt/os.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>

namespace rvgl::spm {

namespace {

double to_us(uint64_t ticks, uint32_t khz) {
  return khz ? static_cast<double>(ticks) * 1000.0 / khz : static_cast<double>(ticks);
}

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

bool write_csv(const std::string &path, const std::vector<Sample> &samples,
               const ExportOptions &opt, std::string *error) {
  const auto sel = selected_counters(opt, samples.empty() ? 0 : samples[0].counters.size());
  try {
    auto out = fmt::output_file(path);
    out.print("xcc,timestamp,time_us");
    for (uint32_t c : sel)
      out.print(",c{}", c);
    out.print("\n");
    for (const auto &s : samples) {
      out.print("{},{},{:.3f}", s.xcc, s.timestamp, to_us(s.timestamp, opt.counter_freq_khz));
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

bool write_trace_json(const std::string &path, const std::vector<Sample> &samples,
                      const ExportOptions &opt, std::string *error) {
  const auto sel = selected_counters(opt, samples.empty() ? 0 : samples[0].counters.size());
  nlohmann::json events = nlohmann::json::array();
  events.push_back({{"name", "process_name"},
                    {"ph", "M"},
                    {"pid", 1},
                    {"args", {{"name", "SPM (rocm-virgl)"}}}});
  for (const auto &s : samples) {
    for (uint32_t c : sel) {
      events.push_back({{"name", fmt::format("xcc{} c{}", s.xcc, c)},
                        {"ph", "C"},
                        {"pid", 1},
                        {"ts", to_us(s.timestamp, opt.counter_freq_khz)},
                        {"args", {{"value", s.counters[c]}}}});
    }
  }
  nlohmann::json doc = {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ns"}};
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

bool write_png(const std::string &path, const std::vector<Sample> &samples,
               const ExportOptions &opt, std::string *error) {
  const auto sel = selected_counters(opt, samples.empty() ? 0 : samples[0].counters.size());
  if (sel.empty()) {
    *error = "no samples to plot";
    return false;
  }
  const char *tmp = std::getenv("TMPDIR");
  std::string templ = std::string(tmp && *tmp ? tmp : "/tmp") + "/rvgl-spm-XXXXXX";
  char *data_path = templ.data();
  const int fd = mkstemp(data_path);
  if (fd < 0) {
    *error = "cannot create a temporary file";
    return false;
  }
  {
    FILE *d = fdopen(fd, "w");
    for (const auto &s : samples) {
      if (s.xcc != 0) continue;
      std::fprintf(d, "%.3f", to_us(s.timestamp, opt.counter_freq_khz));
      for (uint32_t c : sel)
        std::fprintf(d, " %u", s.counters[c]);
      std::fprintf(d, "\n");
    }
    std::fclose(d);
  }
  std::string script = fmt::format(
      "set terminal png size 1200,600; set output '{}'; set title 'SPM counters (XCC 0)';"
      "set xlabel 'time (us)'; set ylabel 'count per interval'; set key outside; plot ",
      path);
  for (size_t i = 0; i < sel.size(); ++i)
    script += fmt::format("{}'{}' using 1:{} with lines title 'c{}'", i ? ", " : "", data_path,
                          i + 2, sel[i]);
  const pid_t pid = fork();
  if (pid == 0) {
    execlp("gnuplot", "gnuplot", "-e", script.c_str(), static_cast<char *>(nullptr));
    _exit(127);
  }
  int status = 0;
  if (pid > 0) waitpid(pid, &status, 0);
  unlink(data_path);
  if (pid < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    *error = "gnuplot failed (is gnuplot-nox installed?)";
    return false;
  }
  return true;
}

}  // namespace rvgl::spm
