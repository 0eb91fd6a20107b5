// The system calls the virtio-gpu transport makes on a render node, behind an interface: tests
// put a fake virtio-gpu device underneath (no VM runs in CI), and a guest stack can route them
// through its own DRM layer. The default, system_virtgpu_syscalls(), makes the real calls.
//
// Every call returns what the system call returns on success and a negative errno on failure
// (never -1 with errno), so an implementation needs no thread-local state to report an error.
//
// Only the render node's fd and its mappings go through here. Fds the kernel hands out from an
// ioctl (EXECBUFFER's sync_file) are ordinary fds: they are polled through poll() below but closed
// by their owner (UniqueFd), so a fake must hand out real fds for them.
#pragma once

#include <poll.h>
#include <sys/types.h>

#include <cstddef>
#include <string>
#include <vector>

namespace rvgl::guest {

class VirtgpuSyscalls {
 public:
  virtual ~VirtgpuSyscalls() = default;

  virtual int open(const char *path, int flags) = 0;  // an fd, or -errno
  virtual int close(int fd) = 0;
  virtual int ioctl(int fd, unsigned long request, void *arg) = 0;  // >= 0, or -errno
  // 0 and the address in *addr, or -errno.
  virtual int mmap(void **addr, size_t length, int prot, int flags, int fd, off_t offset) = 0;
  virtual int munmap(void *addr, size_t length) = 0;
  virtual int poll(pollfd *fds, nfds_t count, int timeout_ms) = 0;  // ready count, or -errno
  virtual ssize_t read(int fd, void *buf, size_t size) = 0;
  // The entry names of a directory, without "." and "..": where render nodes are found.
  virtual int list_dir(const char *path, std::vector<std::string> &names) = 0;
};

// The real system calls. One instance for the process; stateless, so safe from any thread.
VirtgpuSyscalls &system_virtgpu_syscalls();

}  // namespace rvgl::guest
