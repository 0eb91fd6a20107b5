#include "spm_plot.h"

#include <fmt/core.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "spm_series.h"

namespace rvgl::spm {

namespace {

namespace fs = std::filesystem;

constexpr int kWidth = 1200;
constexpr int kTop = 56;         // page title and, for several XCCs, the key
constexpr int kPanelTitle = 24;  // above each panel's plot area
constexpr int kPanelPlot = 126;  // plot area height
constexpr int kBottom = 64;      // time tics and label
constexpr int kLeft = 90, kRight = 30;

// Colours: a light one for the raw samples under a dark one for the smoothed line. Several XCCs
// get the dark colours of a qualitative palette, raw samples drawn faint (#AARRGGBB: AA is the
// transparency).
constexpr const char *kRawSingle = "#a6c4e0";
constexpr const char *kSmoothSingle = "#1f4e8c";
constexpr const char *kPalette[] = {"1f77b4", "d62728", "2ca02c", "9467bd",
                                    "ff7f0e", "17becf", "8c564b", "e377c2"};
constexpr const char *kShade = "#f6cfcb";

// A gnuplot single-quoted string: the only escape is a doubled quote.
std::string gp_string(const std::string &s) {
  std::string out = "'";
  for (char c : s)
    out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

// A private temporary directory, removed with everything in it.
class TempDir {
 public:
  bool create() {
    const char *t = std::getenv("TMPDIR");
    std::string templ = std::string(t && *t ? t : "/tmp") + "/rvgl-spm-XXXXXX";
    if (!mkdtemp(templ.data())) return false;
    path_ = templ;
    return true;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) fs::remove_all(path_, ec);
  }
  const std::string &path() const { return path_; }

 private:
  std::string path_;
};

// A tic step of 1, 2 or 5 times a power of ten giving three to six tics over `range`.
double nice_step(double range) {
  if (!(range > 0)) return 1;
  const double raw = range / 4, mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0})
    if (raw <= m * mag) return std::max(1.0, m * mag);
  return std::max(1.0, 10 * mag);
}

bool run_gnuplot(const std::string &script, std::string *error) {
  const pid_t pid = fork();
  if (pid == 0) {
    execlp("gnuplot", "gnuplot", script.c_str(), static_cast<char *>(nullptr));
    _exit(127);
  }
  int status = 0;
  if (pid > 0) waitpid(pid, &status, 0);
  if (pid < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    *error = "gnuplot failed (is gnuplot-nox installed?)";
    return false;
  }
  return true;
}

// One XCC's samples as plotted: per counter the raw values and their moving average, with the
// indices where a gap starts (the line is broken there).
struct XccSeries {
  uint32_t xcc;
  std::vector<double> t;
  std::vector<std::vector<double>> raw, smooth;  // [panel][sample]
  std::vector<bool> break_before;
};

XccSeries build_series(const std::vector<Sample> &samples, uint32_t xcc,
                       const std::vector<uint32_t> &counters, const TimeAxis &axis,
                       const std::vector<Gap> &gaps, bool several) {
  XccSeries s{xcc,
              {},
              std::vector<std::vector<double>>(counters.size()),
              std::vector<std::vector<double>>(counters.size()),
              {}};
  for (const auto &smp : samples) {
    if (smp.xcc != xcc) continue;
    s.t.push_back(axis.to_unit(smp.timestamp));
    s.break_before.push_back(
        std::any_of(gaps.begin(), gaps.end(), [&](const Gap &g) { return g.to == smp.timestamp; }));
    for (size_t j = 0; j < counters.size(); ++j)
      s.raw[j].push_back(smp.counters[counters[j]]);
  }
  // A window of 1/50 of the samples, never across a gap. Several XCCs share a panel, so their
  // lines are smoothed at least over 9 samples and their raw samples drawn faint: overlaid, the
  // raw lines of eight XCCs are noise.
  const size_t window = std::max<size_t>(several ? 9 : 1, s.t.size() / 50) | 1;
  for (size_t j = 0; j < counters.size(); ++j) {
    s.smooth[j].resize(s.t.size());
    size_t begin = 0;
    for (size_t i = 1; i <= s.t.size(); ++i) {
      if (i < s.t.size() && !s.break_before[i]) continue;
      const std::vector<double> seg(s.raw[j].begin() + begin, s.raw[j].begin() + i);
      const std::vector<double> avg = moving_average(seg, window);
      std::copy(avg.begin(), avg.end(), s.smooth[j].begin() + begin);
      begin = i;
    }
  }
  return s;
}

bool write_page(const std::string &png, const std::string &dir, size_t page, size_t pages,
                const std::vector<XccSeries> &series, const std::vector<size_t> &panels,
                const std::vector<uint32_t> &counters, const std::vector<Gap> &gaps,
                const TimeAxis &axis, const ExportOptions &opt, std::string *error) {
  const std::string data = fmt::format("{}/page{}.dat", dir, page);
  const std::string script_path = fmt::format("{}/page{}.gp", dir, page);
  {
    std::ofstream d(data);
    for (const XccSeries &s : series) {
      for (size_t i = 0; i < s.t.size(); ++i) {
        if (s.break_before[i]) d << "\n";  // one blank line: gnuplot breaks the line here
        d << fmt::format("{:.6g}", s.t[i]);
        for (size_t p : panels)
          d << fmt::format(" {} {:.6g}", s.raw[p][i], s.smooth[p][i]);
        d << "\n";
      }
      d << "\n\n";  // two blank lines end a data block (gnuplot "index")
    }
    if (!d) {
      *error = "cannot write " + data;
      return false;
    }
  }
  const PageLayout L = page_layout(panels.size());
  auto sx = [&](int px) { return static_cast<double>(px) / L.width; };
  auto sy = [&](int px) { return 1.0 - static_cast<double>(px) / L.height; };

  std::string title = "SPM counters";
  if (!opt.device.empty()) title += ", " + opt.device;
  title += series.size() == 1 ? fmt::format(", XCC {}", series[0].xcc)
                              : fmt::format(", {} XCCs", series.size());
  if (pages > 1) title += fmt::format(" (page {} of {})", page + 1, pages);
  if (!gaps.empty()) title += ". Shaded: no samples (data lost)";

  std::string g;
  g += fmt::format("set terminal pngcairo size {},{} font 'sans,10' background '#ffffff'\n",
                   L.width, L.height);
  g += "set termoption noenhanced\n";  // names hold '_', which enhanced text makes a subscript
  g += fmt::format("set output {}\n", gp_string(png));
  g += fmt::format("set multiplot title {} font ',12'\n", gp_string(title));
  g += "set border 3 lc rgb '#707070'\nset tics nomirror\n";
  g += "set grid xtics ytics lc rgb '#e6e6e6' lw 1 dt 1\nset key noautotitle\n";
  g += fmt::format("set xrange [0:{:.6g}]\n", axis.span > 0 ? axis.span : 1.0);
  g += fmt::format("set lmargin at screen {:.5f}\nset rmargin at screen {:.5f}\n", sx(L.left),
                   sx(L.right));
  int obj = 1;
  for (const Gap &gap : gaps)
    g += fmt::format(
        "set object {} rect from first {:.6g}, graph 0 to first {:.6g}, graph 1 behind "
        "fc rgb '{}' fs solid 1.0 noborder\n",
        obj++, axis.to_unit(gap.from), axis.to_unit(gap.to), kShade);
  for (size_t k = 0; k < panels.size(); ++k) {
    const auto &rows = L.panels[k];
    const size_t p = panels[k];
    CounterInfo tmp;
    const CounterInfo &ci = counter_info(opt, counters[p], &tmp);
    double lo = 1e300, hi = -1e300;
    for (const XccSeries &s : series)
      for (double v : s.raw[p]) {
        lo = std::min(lo, v);
        hi = std::max(hi, v);
      }
    const double pad = hi > lo ? (hi - lo) * 0.08 : 1.0;
    g += fmt::format("set tmargin at screen {:.5f}\nset bmargin at screen {:.5f}\n", sy(rows.top),
                     sy(rows.bottom));
    g += fmt::format("set yrange [{:.6g}:{:.6g}]\nset ytics {:.6g}\nset format y '%g'\n", lo - pad,
                     hi + pad, nice_step(hi + pad - (lo - pad)));
    g += fmt::format(
        "set label 1 {} at graph 0, graph 1 offset 0,0.9 left font ',10' tc rgb '#202020'\n",
        gp_string(fmt::format("{}  ({})", ci.name, ci.unit)));
    if (k + 1 == panels.size())
      g += fmt::format("set format x '%g'\nset xlabel {}\n",
                       gp_string(fmt::format("time since the first sample ({})", axis.unit)));
    else
      g += "set format x ''\nunset xlabel\n";
    if (k == 0 && series.size() > 1)
      g += fmt::format("set key at screen {:.5f}, screen {:.5f} right top horizontal font ',9'\n",
                       sx(L.right), sy(kTop - 26));
    else
      g += "unset key\n";
    g += "plot ";
    const int raw_col = 2 + 2 * static_cast<int>(k), smooth_col = raw_col + 1;
    for (size_t x = 0; x < series.size(); ++x) {
      const bool one = series.size() == 1;
      const std::string raw =
          one ? kRawSingle : fmt::format("#d8{}", kPalette[series[x].xcc % std::size(kPalette)]);
      const std::string smooth =
          one ? kSmoothSingle : fmt::format("#{}", kPalette[series[x].xcc % std::size(kPalette)]);
      g += fmt::format(
          "{}{} index {} using 1:{} with lines lw 1 lc rgb '{}', '' index {} using 1:{} with "
          "lines lw 2 lc rgb '{}'{}",
          x ? ", " : "", gp_string(data), x, raw_col, raw, x, smooth_col, smooth,
          one ? "" : fmt::format(" title 'XCC {}'", series[x].xcc));
    }
    g += "\n";
  }
  g += "unset multiplot\n";
  {
    std::ofstream f(script_path);
    f << g;
    if (!f) {
      *error = "cannot write " + script_path;
      return false;
    }
  }
  return run_gnuplot(script_path, error);
}

}  // namespace

PageLayout page_layout(size_t panels) {
  PageLayout L;
  L.width = kWidth;
  L.height = kTop + static_cast<int>(panels) * (kPanelTitle + kPanelPlot) + kBottom;
  L.left = kLeft;
  L.right = kWidth - kRight;
  for (size_t i = 0; i < panels; ++i) {
    const int top = kTop + static_cast<int>(i) * (kPanelTitle + kPanelPlot) + kPanelTitle;
    L.panels.push_back({top, top + kPanelPlot});
  }
  return L;
}

std::string page_path(const std::string &path, size_t page) {
  if (page == 0) return path;
  const fs::path p(path);
  return (p.parent_path() / fmt::format("{}-{}{}", p.stem().string(), page + 1,
                                        p.has_extension() ? p.extension().string() : ".png"))
      .string();
}

bool write_png(const std::string &path, const std::vector<Sample> &samples,
               const ExportOptions &opt, const PlotOptions &plot, std::vector<std::string> *pages,
               std::string *error) {
  std::vector<uint32_t> xccs;
  if (plot.all_xccs)
    xccs = xccs_present(samples);
  else
    xccs = {opt.xcc.value_or(0)};
  std::vector<Sample> shown;
  for (const auto &s : samples)
    if (std::find(xccs.begin(), xccs.end(), s.xcc) != xccs.end()) shown.push_back(s);
  const auto counters = selected_counters(opt, shown.empty() ? 0 : shown[0].counters.size());
  if (shown.empty() || counters.empty()) {
    *error = shown.empty() ? fmt::format("no samples of XCC {} to plot", xccs.empty() ? 0 : xccs[0])
                           : "no counters to plot";
    return false;
  }
  if (plot.panels_per_page == 0) {
    *error = "a page needs at least one panel";
    return false;
  }
  const TimeAxis axis = choose_time_axis(shown, {}, opt.counter_freq_khz);
  std::vector<Gap> gaps;
  std::vector<XccSeries> series;
  for (uint32_t x : xccs) {
    const auto g = find_gaps(shown, x);
    gaps.insert(gaps.end(), g.begin(), g.end());
    series.push_back(build_series(shown, x, counters, axis, g, xccs.size() > 1));
  }
  TempDir dir;
  if (!dir.create()) {
    *error = "cannot create a temporary directory";
    return false;
  }
  const size_t per = plot.panels_per_page;
  const size_t n_pages = (counters.size() + per - 1) / per;
  for (size_t page = 0; page < n_pages; ++page) {
    std::vector<size_t> panels;
    for (size_t k = page * per; k < std::min(counters.size(), (page + 1) * per); ++k)
      panels.push_back(k);
    const std::string out = page_path(path, page);
    if (!write_page(out, dir.path(), page, n_pages, series, panels, counters, gaps, axis, opt,
                    error))
      return false;
    pages->push_back(out);
  }
  return true;
}

}  // namespace rvgl::spm
