#include "util/proc_maps.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "interpose/real_libc.h"

namespace rvgl::emu {

bool vmas_overlapping(uint64_t addr, uint64_t len, std::vector<Vma> &out) {
  out.clear();
  const int fd = real::open("/proc/self/maps", O_RDONLY | O_CLOEXEC, 0);
  if (fd < 0) return false;
  std::string text;
  char buf[65536];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof(buf))) > 0)
    text.append(buf, static_cast<size_t>(n));
  real::close(fd);
  const uint64_t end = addr + len;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string::npos) eol = text.size();
    const char *line = text.c_str() + pos;
    // "start-end perms offset dev inode [path]"
    char *p;
    const uint64_t s = std::strtoull(line, &p, 16);
    const uint64_t e = std::strtoull(p + 1, &p, 16);
    if (e > addr && s < end) {
      Vma v{s, e, p[1] == 'r', p[2] == 'w', false};
      p += 5;
      std::strtoull(p, &p, 16);  // offset
      while (*p == ' ')
        ++p;
      while (*p && *p != ' ')
        ++p;  // dev
      const uint64_t inode = std::strtoull(p, &p, 10);
      v.file_backed = inode != 0;
      out.push_back(v);
    }
    if (s >= end) break;
    pos = eol + 1;
  }
  return true;
}

}  // namespace rvgl::emu
