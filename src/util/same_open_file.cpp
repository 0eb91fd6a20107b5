#include "util/same_open_file.h"

#include <dirent.h>

#include <climits>
#include <cstdlib>

namespace rvgl {

int open_file_named_elsewhere(int fd) {
  DIR *dir = opendir("/proc/self/fd");
  if (!dir) return errno ? -errno : -ENOENT;
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
