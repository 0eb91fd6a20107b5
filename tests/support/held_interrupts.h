// Holds the emulated GPU's interrupt handler back until the test lets it go, however slow the
// machine: for tests of what a reader of the user fence sees before the kernel's handler has run
// (recorded the fault, signalled the fence). The handler's latency, RVGL_EMU_IRQ_LATENCY_US, is
// set to its maximum (10 s, emu/config/config.cpp); the emulator reads it again at least every
// millisecond while an interrupt waits (emu/exec/ring_worker.cpp), so lowering it to 0 lets every
// held interrupt go at once.
#pragma once

#include "rvgl_emu.h"

namespace rvgl::test {

class HeldInterrupts {
 public:
  HeldInterrupts() : ok_(set("10000000")) {}
  ~HeldInterrupts() { set("0"); }
  HeldInterrupts(const HeldInterrupts &) = delete;
  HeldInterrupts &operator=(const HeldInterrupts &) = delete;

  bool ok() const { return ok_; }
  // The interrupts held so far, and any later one, are handled at once.
  bool release() { return set("0"); }

 private:
  static bool set(const char *us) { return rvgl_emu_set_knob("RVGL_EMU_IRQ_LATENCY_US", us) == 0; }
  bool ok_;
};

}  // namespace rvgl::test
