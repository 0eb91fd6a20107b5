// The C boundary never throws (issue 13, point 6): every exported function runs its body through
// one of these, which turns an exception into that function's own error value and a warning on
// stderr. Allocation failure (std::bad_alloc) and thread creation failure (std::system_error from
// std::thread) are the expected ones; the paths that can meet them also handle them where they
// happen, with a precise error (create_our_context), so this is the backstop. Zero-cost on the
// path that does not throw.
#pragma once

#include <exception>
#include <new>
#include <type_traits>

#include "log.h"

namespace rvgl::hooks {

// A guest can make a request fail this way as often as it likes: one limit for all of them.
inline void log_escaped(const char *fn) noexcept {
  static LogLimit limit;
  try {
    throw;
  } catch (const std::bad_alloc &) {
    log_warn_limited(limit, "%s: out of memory", fn);
  } catch (const std::exception &e) {
    log_warn_limited(limit, "%s: %s", fn, e.what());
  } catch (...) {
    log_warn_limited(limit, "%s: unknown failure", fn);
  }
}

// Returns f()'s value, or on_error when it throws.
template <class R, class F>
R guarded(const char *fn, R on_error, F &&f) noexcept {
  try {
    return f();
  } catch (...) {
    log_escaped(fn);
    return on_error;
  }
}

// For functions without a result.
template <class F>
void guarded_void(const char *fn, F &&f) noexcept {
  try {
    f();
  } catch (...) {
    log_escaped(fn);
  }
}

}  // namespace rvgl::hooks
