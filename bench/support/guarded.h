// A benchmark whose setup or run throws reports the error in its JSON entry instead of ending
// the whole program (the other figures still get measured).
#pragma once

#include <benchmark/benchmark.h>

#include <exception>

namespace rvgl::bench {

template <void (*Body)(benchmark::State &)>
void guarded(benchmark::State &state) {
  try {
    Body(state);
  } catch (const std::exception &e) {
    state.SkipWithError(e.what());
  }
}

}  // namespace rvgl::bench
