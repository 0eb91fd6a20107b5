// The number of threads this process has, as the kernel lists them: a thread counts until it has
// exited, whether or not anything joined it.
#pragma once

#include <dirent.h>

namespace rvgl::test {

inline int thread_count() {
  int n = 0;
  if (DIR *d = opendir("/proc/self/task")) {
    while (dirent *e = readdir(d))
      n += e->d_name[0] != '.';
    closedir(d);
  }
  return n;
}

}  // namespace rvgl::test
