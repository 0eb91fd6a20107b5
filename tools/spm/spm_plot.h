// The PNG of a recorded SPM stream (rendered by gnuplot): one panel per counter, stacked over a
// shared time axis from the first sample, each titled with the counter's name and unit, raw
// samples in a light colour under a moving average, XCCs in colours of their own, intervals
// without samples shaded. Counters beyond one page's panels go on further pages.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "spm_export.h"

namespace rvgl::spm {

struct PlotOptions {
  uint32_t panels_per_page = 8;
  bool all_xccs = false;  // every XCC in one plot; else ExportOptions::xcc (default 0)
};

// Pixel geometry of one page, so that tests can find each panel's plot area in the image.
struct PageLayout {
  int width = 0, height = 0;
  int left = 0, right = 0;  // plot area columns [left, right)
  struct Rows {
    int top, bottom;  // plot area rows [top, bottom)
  };
  std::vector<Rows> panels;
};

PageLayout page_layout(size_t panels);

// `path` for page 1, `<stem>-<n>.png` for page n; the files written go to *pages.
std::string page_path(const std::string &path, size_t page);

bool write_png(const std::string &path, const std::vector<Sample> &samples,
               const ExportOptions &opt, const PlotOptions &plot, std::vector<std::string> *pages,
               std::string *error);

}  // namespace rvgl::spm
