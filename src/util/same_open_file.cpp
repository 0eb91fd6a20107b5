#include "util/same_open_file.h"

#include <dirent.h>
#include <sys/resource.h>

#include <climits>
#include <cstdlib>

namespace rvgl {

namespace {

// same_open_file(), where no fd of number n (never opened, or closed by another thread since it
// was listed) names nothing.
int names_it(pid_t self, int fd, int n) {
  const int same = same_open_file(self, fd, n);
  return same == -EBADF ? 0 : same;
}

}  // namespace

int open_file_named_below(int fd, int limit) {
  const pid_t self = getpid();
  for (int n = 0; n < limit; ++n) {
    if (n == fd) continue;
    if (const int same = names_it(self, fd, n)) return same;
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
    result = names_it(self, fd, static_cast<int>(n));
    if (result != 0) break;
  }
  closedir(dir);
  return result;
}

}  // namespace rvgl
