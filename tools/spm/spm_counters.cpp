#include "spm_counters.h"

#include <fmt/core.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <sstream>

#include "spm_decode.h"

namespace rvgl::spm {

namespace {
constexpr uint32_t kSlotsPerLine = 16;
constexpr uint32_t kTimestampSlots = 4;  // the global segment opens with a 64-bit timestamp
constexpr size_t kMaxNameLength = 64;

bool parse_index(std::string_view s, uint32_t *out) {
  if (s.empty()) return false;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && p == s.data() + s.size();
}
}  // namespace

std::vector<CounterInfo> layout_counter_names(const SpmRecordingHeader &layout) {
  std::vector<CounterInfo> out;
  out.reserve(counters_per_sample(layout));
  const uint32_t global = layout.global_lines * kSlotsPerLine - kTimestampSlots;
  for (uint32_t i = 0; i < global; ++i)
    out.push_back({fmt::format("GLOBAL_{}", i), std::string(kPerSampleUnit)});
  for (uint32_t se = 0; se < layout.shader_engines; ++se)
    for (uint32_t i = 0; i < layout.se_lines * kSlotsPerLine; ++i)
      out.push_back({fmt::format("SE{}_{}", se, i), std::string(kPerSampleUnit)});
  return out;
}

bool valid_counter_name(std::string_view name) {
  return !name.empty() && name.size() <= kMaxNameLength &&
         std::all_of(name.begin(), name.end(), [](char c) {
           return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '_' || c == '.' || c == ':' || c == '-';
         });
}

bool valid_counter_unit(std::string_view unit) {
  return unit.size() <= kMaxNameLength && std::all_of(unit.begin(), unit.end(), [](char c) {
           return c >= 0x20 && c < 0x7f && c != '"' && c != '\'' && c != ',' && c != '\\';
         });
}

bool read_counter_names(const std::string &path, std::vector<CounterInfo> *names,
                        std::string *error) {
  std::ifstream f(path);
  if (!f) {
    *error = "cannot open " + path;
    return false;
  }
  std::string line;
  for (unsigned n = 1; std::getline(f, line); ++n) {
    if (const size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::istringstream in(line);
    std::string index, name, word, unit;
    if (!(in >> index)) continue;  // blank or comment
    in >> name;
    while (in >> word)
      unit += (unit.empty() ? "" : " ") + word;
    uint32_t i = 0;
    if (!parse_index(index, &i) || i >= names->size() || !valid_counter_name(name) ||
        !valid_counter_unit(unit)) {
      *error = fmt::format("{}:{}: expected \"INDEX NAME [UNIT]\" with INDEX below {}", path, n,
                           names->size());
      return false;
    }
    (*names)[i] = {name, unit.empty() ? std::string(kPerSampleUnit) : unit};
  }
  return true;
}

bool select_counters(const std::vector<std::string> &spec, const std::vector<CounterInfo> &names,
                     size_t default_count, std::vector<uint32_t> *out, std::string *error) {
  out->clear();
  auto add = [&](uint32_t i) {
    if (std::find(out->begin(), out->end(), i) == out->end()) out->push_back(i);
  };
  if (spec.empty()) {
    for (uint32_t i = 0; i < default_count && i < names.size(); ++i)
      add(i);
    return true;
  }
  for (const std::string &item : spec) {
    uint32_t i = 0;
    if (item == "all") {
      for (uint32_t k = 0; k < names.size(); ++k)
        add(k);
    } else if (parse_index(item, &i)) {
      if (i >= names.size()) {
        *error = fmt::format("counter {} does not exist (a sample has {})", i, names.size());
        return false;
      }
      add(i);
    } else {
      const auto it = std::find_if(names.begin(), names.end(),
                                   [&](const CounterInfo &c) { return c.name == item; });
      if (it == names.end()) {
        *error = fmt::format("no counter is named {}", item);
        return false;
      }
      add(static_cast<uint32_t>(it - names.begin()));
    }
  }
  return true;
}

}  // namespace rvgl::spm
