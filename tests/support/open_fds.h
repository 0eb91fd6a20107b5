// The descriptors this process has open, as the kernel lists them: what a test compares before
// and after to tell that nothing of the code under test was left open.
#pragma once

#include <dirent.h>

#include <cstdlib>
#include <set>
#include <stdexcept>

namespace rvgl::test {

// Their numbers, the listing's own descriptor left out.
inline std::set<int> open_fds() {
  std::set<int> fds;
  DIR *d = opendir("/proc/self/fd");
  if (!d) throw std::runtime_error("test: /proc/self/fd");
  while (const dirent *e = readdir(d))
    if (e->d_name[0] != '.') fds.insert(std::atoi(e->d_name));
  fds.erase(dirfd(d));
  closedir(d);
  return fds;
}

inline size_t open_fd_count() {
  return open_fds().size();
}

}  // namespace rvgl::test
