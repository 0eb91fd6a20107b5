// The real libvirglrenderer behind us: its functions, found lazily with dlsym(RTLD_NEXT) — the
// next definition after this library in the process's search order, whether we are preloaded
// into a VMM or linked in front of the real library.
//
// A symbol the real library lacks (an older version, or no library at all) resolves to null and
// the caller returns an error; nothing here aborts.
#pragma once

#include <atomic>

namespace rvgl::hooks {

// The next definition of `name` after this library, or null.
void *resolve_real(const char *name);

// One real function, resolved on first use. A null result is retried on the next call, so a
// library loaded later (dlopen) is still found.
template <class Fn>
class RealSymbol {
 public:
  explicit RealSymbol(const char *name) : name_(name) {}
  Fn get() {
    void *p = ptr_.load(std::memory_order_acquire);
    if (!p) {
      p = resolve_real(name_);
      ptr_.store(p, std::memory_order_release);
    }
    return reinterpret_cast<Fn>(p);
  }

 private:
  const char *name_;
  std::atomic<void *> ptr_{nullptr};
};

// The 1.x ABI (resource_info with `fd`, 64-bit export_fence ids) is in use when the real library
// has virgl_renderer_resource_get_info_ext, which 1.0.0 introduced together with those changes.
bool real_has_v1_abi();

}  // namespace rvgl::hooks

// The real counterpart of the exported function `fn`, typed like our declaration of it.
#define RVGL_REAL(fn)                                                    \
  ([]() {                                                                \
    static ::rvgl::hooks::RealSymbol<decltype(&::fn)> real_symbol_(#fn); \
    return real_symbol_.get();                                           \
  }())
