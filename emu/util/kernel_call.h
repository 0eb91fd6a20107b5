// Marks this thread as inside an emulated kernel call (an interposed libc entry point that took
// the emulator's path), for rvgl_emu_thread_in_kernel(). A test that fails the allocations of the
// code under test (tests/robustness/alloc_sweep.cpp) leaves the kernel's own alone: a kernel that
// runs short of memory answers ENOMEM, which the kernel-call sweep already covers.
#pragma once

namespace rvgl::emu {

inline thread_local int t_kernel_call_depth = 0;

class KernelCall {
 public:
  KernelCall() { ++t_kernel_call_depth; }
  ~KernelCall() { --t_kernel_call_depth; }
  KernelCall(const KernelCall &) = delete;
  KernelCall &operator=(const KernelCall &) = delete;
};

}  // namespace rvgl::emu
