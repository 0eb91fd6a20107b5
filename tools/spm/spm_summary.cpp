#include "spm_summary.h"

#include <fmt/core.h>

#include "spm_series.h"

namespace rvgl::spm {

std::string summary_text(const std::vector<Sample> &all, const ExportOptions &opt) {
  const std::vector<Sample> samples = filter_xcc(all, opt);
  const auto sel = selected_counters(opt, samples.empty() ? 0 : samples[0].counters.size());
  std::string out;
  CounterInfo tmp;
  size_t width = 7;
  for (uint32_t c : sel)
    width = std::max(width, counter_info(opt, c, &tmp).name.size());
  for (uint32_t x : xccs_present(samples)) {
    const TimeAxis t = choose_time_axis(samples, {x}, opt.counter_freq_khz);
    const auto gaps = find_gaps(samples, x);
    const CounterStats any =
        counter_stats(samples, x, sel.empty() ? 0 : sel[0], opt.counter_freq_khz);
    out += fmt::format("XCC {}: {} samples over {:.3f} {}, {} interval(s) without samples\n", x,
                       any.samples, t.span, t.unit, gaps.size());
    out += fmt::format("  {:<{}} {:<14} {:>8} {:>8} {:>8} {:>14}\n", "counter", width, "unit",
                       "min", "median", "max", "mean/s");
    for (uint32_t c : sel) {
      const CounterStats st = counter_stats(samples, x, c, opt.counter_freq_khz);
      const CounterInfo &ci = counter_info(opt, c, &tmp);
      out += fmt::format("  {:<{}} {:<14} {:>8.0f} {:>8.1f} {:>8.0f} {:>14.0f}\n", ci.name, width,
                         ci.unit, st.min, st.median, st.max, st.per_second);
    }
  }
  return out;
}

}  // namespace rvgl::spm
