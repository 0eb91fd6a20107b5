// What the emulator counted per RVGL_EMU_FAIL name since counting (rvgl_emu_count_calls) or a
// rule started: every thread's calls, or, read with rvgl_emu_counting_thread_call_counts, those of
// the thread that started counting.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <sstream>
#include <string>

#include "rvgl_emu.h"

namespace rvgl::test {

using EmuCountsReader = size_t (*)(char *, size_t);

inline std::map<std::string, uint64_t> emu_call_counts(
    EmuCountsReader read = rvgl_emu_call_counts) {
  // Another thread (a completion engine) may make a call of a name not counted yet between the
  // size and the text: the text then no longer fits, and the names sorted last were cut off
  // (VERSION went missing once in a fresh-clone run). Read again until it all fits.
  std::string text;
  for (;;) {
    text.assign(read(nullptr, 0) + 256, '\0');
    const size_t len = read(text.data(), text.size());
    if (len < text.size()) {
      text.resize(len);
      break;
    }
  }
  std::map<std::string, uint64_t> out;
  std::istringstream in(text);
  std::string name;
  uint64_t n;
  while (in >> name >> n)
    out[name] = n;
  return out;
}

}  // namespace rvgl::test
