// Sets an emulator knob for a scope (rvgl_emu_set_knob); restores `restore` after (by default
// what the suite's environment set, else 0).
#pragma once

#include <cstdlib>
#include <string>

#include "rvgl_emu.h"

namespace rvgl::test {

class ScopedKnob {
 public:
  ScopedKnob(const char *name, const std::string &value, const char *restore = nullptr)
      : name_(name), restore_(restore ? restore : (std::getenv(name) ? std::getenv(name) : "0")) {
    ok_ = rvgl_emu_set_knob(name, value.c_str()) == 0;
  }
  ~ScopedKnob() { rvgl_emu_set_knob(name_.c_str(), restore_.c_str()); }
  ScopedKnob(const ScopedKnob &) = delete;
  ScopedKnob &operator=(const ScopedKnob &) = delete;
  bool ok() const { return ok_; }

 private:
  std::string name_, restore_;
  bool ok_;
};

}  // namespace rvgl::test
