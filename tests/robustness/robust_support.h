// Shared pieces of the robustness suite: emulator knobs and counters, event reading, a small
// scripted guest workload.
#pragma once

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "../tools/common/amd_packets.h"
#include "rvgl_emu.h"
#include "support/context_harness.h"
#include "support/scoped_knob.h"
#include "support/wait_for.h"

namespace rvgl::test {

inline rvgl_emu_counters emu_counters() {
  rvgl_emu_counters c{};
  rvgl_emu_get_counters(&c, sizeof(c));
  return c;
}

// Reads the event records the host wrote since the last call, as a guest does.
inline std::vector<rvgl_event> read_events(ContextHarness &h) {
  std::vector<rvgl_event> out;
  auto *hdr = reinterpret_cast<rvgl_shmem_header *>(h.shmem());
  const uint32_t w = __atomic_load_n(&hdr->event_wptr, __ATOMIC_ACQUIRE);
  for (uint32_t r = hdr->event_rptr; r != w; ++r) {
    rvgl_event e;
    std::memcpy(&e, h.shmem() + RVGL_EVENT_RING_OFFSET + (r % RVGL_EVENT_RING_ENTRIES) * sizeof(e),
                sizeof(e));
    out.push_back(e);
  }
  __atomic_store_n(&hdr->event_rptr, w, __ATOMIC_RELEASE);
  return out;
}

}  // namespace rvgl::test
