// The emulator's counters as another process sees them: with RVGL_EMU_COUNTERS_INTERVAL_MS set,
// each process that opened an emulated node keeps `<state dir>/counters-<pid>.txt` up to date
// ("name value" lines, replaced atomically) and writes it once more at exit (emu/README.md).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace rvgl::e2e {

using EmuCounters = std::map<std::string, uint64_t>;

// The counters of `pid`, or nothing while its file does not exist yet.
std::optional<EmuCounters> read_emu_counters(const std::string &state_dir, pid_t pid);

// The pids that have a counters file in `state_dir`.
std::vector<pid_t> emu_counter_pids(const std::string &state_dir);

// A counter's value, 0 when the file does not name it.
uint64_t counter(const EmuCounters &c, const std::string &name);

}  // namespace rvgl::e2e
