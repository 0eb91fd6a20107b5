// This process's pid without a system call per use (getpid is one in glibc >= 2.25): for the
// system calls the emulator makes on its caller's behalf (process_vm_readv/writev), which a
// kernel ioctl would not make at all.
#pragma once

#include <sys/types.h>

namespace rvgl::emu {

// Read once, and again in a fork child (pthread_atfork: glibc's fork and posix_spawn run it).
pid_t self_pid();

}  // namespace rvgl::emu
