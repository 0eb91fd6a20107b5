#include "rvgl_virtgpu_syscalls.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace rvgl::guest {

namespace {

class SystemSyscalls final : public VirtgpuSyscalls {
 public:
  int open(const char *path, int flags) override {
    const int fd = ::open(path, flags);
    return fd < 0 ? -errno : fd;
  }
  int close(int fd) override { return ::close(fd) < 0 ? -errno : 0; }
  int ioctl(int fd, unsigned long request, void *arg) override {
    const int r = ::ioctl(fd, request, arg);
    return r < 0 ? -errno : r;
  }
  int mmap(void **addr, size_t length, int prot, int flags, int fd, off_t offset) override {
    void *p = ::mmap(nullptr, length, prot, flags, fd, offset);
    if (p == MAP_FAILED) return -errno;
    *addr = p;
    return 0;
  }
  int munmap(void *addr, size_t length) override { return ::munmap(addr, length) < 0 ? -errno : 0; }
  int poll(pollfd *fds, nfds_t count, int timeout_ms) override {
    const int r = ::poll(fds, count, timeout_ms);
    return r < 0 ? -errno : r;
  }
  ssize_t read(int fd, void *buf, size_t size) override {
    const ssize_t r = ::read(fd, buf, size);
    return r < 0 ? -errno : r;
  }
  int list_dir(const char *path, std::vector<std::string> &names) override {
    DIR *d = ::opendir(path);
    if (!d) return -errno;
    names.clear();
    while (const dirent *e = ::readdir(d)) {
      if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
      names.emplace_back(e->d_name);
    }
    ::closedir(d);
    return 0;
  }
};

}  // namespace

VirtgpuSyscalls &system_virtgpu_syscalls() {
  static SystemSyscalls instance;
  return instance;
}

}  // namespace rvgl::guest
