#include "memory/host_file_ranges.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace rvgl {

std::optional<HostFileRanges> HostFileRanges::snapshot() {
  FILE *f = std::fopen("/proc/self/maps", "re");
  if (!f) return std::nullopt;
  HostFileRanges r;
  char line[4096];
  while (std::fgets(line, sizeof(line), f)) {
    uint64_t start, end, offset, ino;
    unsigned maj, min;
    char perms[8];
    if (std::sscanf(line, "%" SCNx64 "-%" SCNx64 " %7s %" SCNx64 " %x:%x %" SCNu64, &start, &end,
                    perms, &offset, &maj, &min, &ino) != 7)
      continue;
    r.vmas_[start] =
        Vma{start, end, offset, makedev(maj, min), static_cast<ino_t>(ino), perms[3] == 's'};
  }
  std::fclose(f);
  return r;
}

bool HostFileRanges::resolve(uint64_t addr, uint64_t size, std::vector<FilePiece> *out) const {
  uint64_t cur = addr;
  const uint64_t end = addr + size;
  while (cur < end) {
    auto it = vmas_.upper_bound(cur);
    if (it == vmas_.begin()) return false;
    const Vma &v = std::prev(it)->second;
    if (cur >= v.end || !v.shared || v.ino == 0) return false;
    const uint64_t len = std::min(end, v.end) - cur;
    const uint64_t file_off = v.offset + (cur - v.start);
    // Merge with the previous piece when the file continues where it left off.
    if (!out->empty()) {
      FilePiece &p = out->back();
      if (p.dev == v.dev && p.ino == v.ino && p.offset + p.size == file_off &&
          p.addr + p.size == cur) {
        p.size += len;
        cur += len;
        continue;
      }
    }
    out->push_back(FilePiece{cur, len, v.dev, v.ino, file_off});
    cur += len;
  }
  return true;
}

UniqueFd HostFileRanges::find_fd(dev_t dev, ino_t ino) {
  DIR *d = opendir("/proc/self/fd");
  if (!d) return UniqueFd();
  const int self = dirfd(d);
  UniqueFd found;
  while (dirent *e = readdir(d)) {
    char *endp = nullptr;
    long fd = std::strtol(e->d_name, &endp, 10);
    if (*endp || fd == self) continue;
    struct stat st;
    if (fstat(static_cast<int>(fd), &st) == 0 && st.st_dev == dev && st.st_ino == ino) {
      found.reset(fcntl(static_cast<int>(fd), F_DUPFD_CLOEXEC, 0));
      break;
    }
  }
  closedir(d);
  return found;
}

uint64_t max_map_count() {
  FILE *f = std::fopen("/proc/sys/vm/max_map_count", "re");
  uint64_t v = 65530;
  if (f) {
    if (std::fscanf(f, "%" SCNu64, &v) != 1) v = 65530;
    std::fclose(f);
  }
  return v;
}

}  // namespace rvgl
