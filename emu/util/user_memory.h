// copy_from_user / copy_to_user for a library that shares its address space with the caller: the
// kernel checks every pointer it is given, so the emulator goes through process_vm_readv/writev on
// its own pid, which fails with EFAULT instead of crashing on a bad address.
#pragma once

#include <cstddef>
#include <cstdint>

namespace rvgl::emu {

// While one lives on a thread, caller addresses at or above `caller_frame` and below the end of
// the thread's stack are the caller's live stack: mapped, so copied without a system call (libdrm
// keeps every ioctl struct on its caller's stack). Everything else goes through the checked copy.
class CallerStackScope {
 public:
  explicit CallerStackScope(const void *caller_frame);
  ~CallerStackScope();
  CallerStackScope(const CallerStackScope &) = delete;
  CallerStackScope &operator=(const CallerStackScope &) = delete;

 private:
  uintptr_t previous_;
};

// Each returns 0 or -EFAULT.
int copy_from_user(void *dst, uint64_t user_src, size_t len);
int copy_to_user(uint64_t user_dst, const void *src, size_t len);
// Copies between two caller addresses (both may be bad).
int copy_user_to_user(uint64_t user_dst, uint64_t user_src, size_t len);

}  // namespace rvgl::emu
