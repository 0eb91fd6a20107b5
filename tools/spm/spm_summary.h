// `rvgl-spm --summary`: one line per counter and XCC with the minimum, median and maximum of its
// per-sample counts and its mean rate per second.
#pragma once

#include <string>
#include <vector>

#include "spm_export.h"

namespace rvgl::spm {

// A header line per XCC (samples, span, sample rate), a column header, then one line per
// selected counter: NAME UNIT MIN MEDIAN MAX MEAN/S.
std::string summary_text(const std::vector<Sample> &samples, const ExportOptions &opt);

}  // namespace rvgl::spm
