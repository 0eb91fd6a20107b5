#include "process_limits.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>

namespace rvgl::hooks {

uint32_t max_contexts_from_env() {
  const char *v = std::getenv("RVGL_MAX_CONTEXTS");
  if (!v || !*v) return kDefaultMaxContexts;
  char *end = nullptr;
  const unsigned long n = std::strtoul(v, &end, 0);
  if (*end != '\0' || n == 0 || n > 65536) return kDefaultMaxContexts;
  return static_cast<uint32_t>(n);
}

namespace {

long nofile_limit() {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return -1;
  return static_cast<long>(rl.rlim_cur);
}

// A quarter of the limit, at most 64 (fd_reserve()); none when there is no limit.
int reserve_of(long limit) {
  return limit < 0 ? 0 : static_cast<int>(std::min(64L, limit / 4));
}

}  // namespace

int free_fds() {
  const long limit = nofile_limit();
  if (limit < 0) return -1;
  DIR *d = opendir("/proc/self/fd");
  if (!d) return (errno == EMFILE || errno == ENFILE) ? 0 : -1;
  long open = -1;  // the directory's own fd is listed too
  while (dirent *e = readdir(d))
    if (e->d_name[0] != '.') ++open;
  closedir(d);
  return static_cast<int>(std::max(0L, limit - open));
}

int fd_reserve() {
  return reserve_of(nofile_limit());
}

bool descriptor_left_for_us(int n) {
  const long limit = nofile_limit();  // one getrlimit for both the limit and the reserve
  if (limit < 0) return true;
  // The lowest free descriptor, taken and given back (as any open would take it): the next n
  // opens take it and those above it.
  const int lowest = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 0);
  if (lowest < 0) return errno != EMFILE && errno != ENFILE;  // no stderr: cannot tell
  close(lowest);
  return lowest + n - 1 < limit - reserve_of(limit);
}

}  // namespace rvgl::hooks
