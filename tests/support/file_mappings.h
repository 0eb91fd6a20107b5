// How many of this process's mappings are of a given file, as the kernel lists them: a test that
// gives a library guest RAM (a memfd) checks with it that no host mapping of those pages outlives
// the library's use of them (an alias it made, userptr_import.h).
#pragma once

#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <cstdio>
#include <stdexcept>

namespace rvgl::test {

inline size_t file_mapping_count(int fd) {
  struct stat st {};
  if (fstat(fd, &st)) throw std::runtime_error("test: fstat");
  FILE *maps = std::fopen("/proc/self/maps", "re");
  if (!maps) throw std::runtime_error("test: /proc/self/maps");
  size_t n = 0;
  char line[4096];
  while (std::fgets(line, sizeof line, maps)) {
    // start-end perms offset major:minor inode [path]
    unsigned maj = 0, min = 0;
    unsigned long long ino = 0;
    if (std::sscanf(line, "%*s %*s %*s %x:%x %llu", &maj, &min, &ino) == 3 &&
        maj == major(st.st_dev) && min == minor(st.st_dev) && ino == st.st_ino)
      ++n;
  }
  std::fclose(maps);
  return n;
}

}  // namespace rvgl::test
