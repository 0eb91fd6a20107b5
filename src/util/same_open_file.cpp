#include "util/same_open_file.h"

#include <dirent.h>
#include <sys/resource.h>

#include <climits>
#include <cstdlib>

namespace rvgl {

int open_file_named_below(int fd, int limit) {
  const pid_t self = getpid();
  for (int n = 0; n < limit; ++n) {
    if (n == fd) continue;
    const int same = same_open_file(self, fd, n);
    if (same == 0 || same == -EBADF) continue;  // EBADF: no fd of that number
    return same;
  }
  return 0;
}

int open_file_named_elsewhere(int fd) {
  DIR *dir = opendir("/proc/self/fd");
  if (!dir) {
    // No /proc (a sandbox): ask every number below the soft RLIMIT_NOFILE, when that is few
    // enough. An fd above it (the limit lowered after it was opened) would go unseen: accepted.
    const int why = errno ? errno : ENOENT;
    rlimit rl{};
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY ||
        rl.rlim_cur > kMaxNumbersAsked)
      return -why;
    return open_file_named_below(fd, static_cast<int>(rl.rlim_cur));
  }
  const pid_t self = getpid();
  const int own = dirfd(dir);
  int result = 0;
  for (;;) {
    errno = 0;
    const dirent *e = readdir(dir);
    if (!e) {
      if (errno) result = -errno;
      break;
    }
    char *end = nullptr;
    const long n = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != 0 || n < 0 || n > INT_MAX || n == fd || n == own) continue;
    const int same = same_open_file(self, fd, static_cast<int>(n));
    // EBADF: closed by another thread since the directory was read; it names nothing now.
    if (same == 0 || same == -EBADF) continue;
    result = same;
    break;
  }
  closedir(dir);
  return result;
}

}  // namespace rvgl
