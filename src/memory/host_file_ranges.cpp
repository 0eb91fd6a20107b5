#include "memory/host_file_ranges.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace rvgl {

std::optional<HostFileRanges> HostFileRanges::open(Source source) {
  HostFileRanges r;
  if (source == Source::kTextOnly) {
    if (!r.load_text()) return std::nullopt;
    return r;
  }
  r.query_ = ProcmapQuery::open();
  if (!r.query_.valid()) return std::nullopt;
  return r;
}

bool HostFileRanges::load_text() {
  FILE *f = std::fopen("/proc/self/maps", "re");
  if (!f) return false;
  vmas_.clear();
  last_ = SIZE_MAX;
  char line[4096];
  while (std::fgets(line, sizeof(line), f)) {
    uint64_t start, end, offset, ino;
    unsigned maj, min;
    char perms[8];
    if (std::sscanf(line, "%" SCNx64 "-%" SCNx64 " %7s %" SCNx64 " %x:%x %" SCNu64, &start, &end,
                    perms, &offset, &maj, &min, &ino) != 7)
      continue;
    vmas_.push_back(Vma{start, end, offset, makedev(maj, min), static_cast<ino_t>(ino),
                        perms[3] == 's', perms[1] == 'w'});
  }
  std::fclose(f);
  // The kernel prints VMAs in address order; sort anyway, the lookup depends on it.
  std::sort(vmas_.begin(), vmas_.end(),
            [](const Vma &a, const Vma &b) { return a.start < b.start; });
  complete_ = true;
  return true;
}

const HostFileRanges::Vma *HostFileRanges::find_known(uint64_t addr) {
  auto it = std::upper_bound(vmas_.begin(), vmas_.end(), addr,
                             [](uint64_t a, const Vma &v) { return a < v.start; });
  if (it == vmas_.begin()) return nullptr;
  --it;
  if (addr >= it->end) return nullptr;
  last_ = static_cast<size_t>(it - vmas_.begin());
  return &*it;
}

const HostFileRanges::Vma *HostFileRanges::covering(uint64_t addr) {
  // Scattered guest pages mostly lie in one guest-RAM mapping: the last VMA answers most.
  if (last_ < vmas_.size() && addr >= vmas_[last_].start && addr < vmas_[last_].end)
    return &vmas_[last_];
  if (const Vma *v = find_known(addr)) return v;
  if (complete_) return nullptr;
  if (query_.valid()) {
    ProcVma v;
    const int err = query_.covering(addr, &v);
    if (err == 0) {
      const Vma vma{v.start,
                    v.end,
                    v.offset,
                    makedev(v.dev_major, v.dev_minor),
                    static_cast<ino_t>(v.inode),
                    v.shared,
                    v.writable};
      auto it = std::upper_bound(vmas_.begin(), vmas_.end(), vma.start,
                                 [](uint64_t a, const Vma &x) { return a < x.start; });
      it = vmas_.insert(it, vma);
      last_ = static_cast<size_t>(it - vmas_.begin());
      return &*it;
    }
    if (err == -ENOENT) return nullptr;  // unmapped
    // A kernel before 6.11 (ENOTTY), or a sandbox refusing the ioctl: the text from now on.
    query_ = ProcmapQuery();
  }
  if (!load_text()) return nullptr;
  return find_known(addr);
}

bool HostFileRanges::resolve(uint64_t addr, uint64_t size, std::vector<FilePiece> *out) {
  return for_each_piece(addr, size, [out](const FilePiece &p) {
    if (!out->empty()) {
      FilePiece &b = out->back();
      if (b.dev == p.dev && b.ino == p.ino && b.offset + b.size == p.offset &&
          b.addr + b.size == p.addr) {
        b.size += p.size;
        b.writable = b.writable && p.writable;
        return;
      }
    }
    out->push_back(p);
  });
}

uint64_t HostFileRanges::mapping_count() {
  FILE *f = std::fopen("/proc/self/maps", "re");
  if (!f) return 0;
  uint64_t lines = 0;
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0)
    lines += static_cast<uint64_t>(std::count(buf, buf + n, '\n'));
  std::fclose(f);
  return lines;
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
