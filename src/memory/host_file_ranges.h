// Finds which file, at which offset, backs a range of this process's address space, and an fd
// on that file among the process's own open fds (guest RAM is usually a memfd the VMM holds).
#pragma once

#include <sys/types.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

#include "amdgpu/procmap_query.h"
#include "util/unique_fd.h"

namespace rvgl {

struct FilePiece {
  uint64_t addr;  // host VA
  uint64_t size;
  dev_t dev;
  ino_t ino;
  uint64_t offset;  // in the file
  bool writable;    // every VMA of it: the process may write there
};

// Looks up only the VMAs a range touches, each once per instance: one PROCMAP_QUERY per VMA
// (Linux 6.11+), kept in a sorted list, so thousands of pages of a few guest-RAM mappings cost a
// few lookups, whatever the size of the map. Kernels without the ioctl get one read of
// /proc/self/maps per instance. One instance serves one import: the map may change between imports.
class HostFileRanges {
 public:
  enum class Source { kAny, kTextOnly };  // kTextOnly: as on kernels before 6.11 (for tests)
  static std::optional<HostFileRanges> open(Source source = Source::kAny);

  // Calls piece(const FilePiece &) for [addr, addr + size) split into pieces, each inside one
  // shared file mapping (merged across VMAs where file and address continue), in order; false
  // if any part is unmapped, private or anonymous (the pieces before it were passed already).
  template <class Fn>
  bool for_each_piece(uint64_t addr, uint64_t size, Fn &&piece);

  // The same, appended to *out, merging into its last piece when both continue.
  bool resolve(uint64_t addr, uint64_t size, std::vector<FilePiece> *out);

  // How many VMAs the process has now (one read of /proc/self/maps).
  static uint64_t mapping_count();

  // An fd (dup'ed, owned by the caller) on the file identified by (dev, ino), found among
  // /proc/self/fd; invalid if none.
  static UniqueFd find_fd(dev_t dev, ino_t ino);

 private:
  struct Vma {
    uint64_t start, end, offset;
    dev_t dev;
    ino_t ino;
    bool shared;
    bool writable;
  };
  // The VMA covering addr: the last one found, one found before, the ioctl, or the text.
  const Vma *covering(uint64_t addr);
  const Vma *find_known(uint64_t addr);
  bool load_text();

  ProcmapQuery query_;
  bool complete_ = false;  // vmas_ is the whole map (read from the text)
  std::vector<Vma> vmas_;  // sorted by start, disjoint
  size_t last_ = SIZE_MAX;
};

template <class Fn>
bool HostFileRanges::for_each_piece(uint64_t addr, uint64_t size, Fn &&piece) {
  const uint64_t end = addr + size;
  if (end < addr) return false;
  FilePiece cur{};
  bool have = false;
  for (uint64_t at = addr; at < end;) {
    const Vma *v = covering(at);
    if (!v || !v->shared || v->ino == 0) return false;
    const uint64_t len = std::min(end, v->end) - at;
    const uint64_t file_off = v->offset + (at - v->start);
    if (have && cur.dev == v->dev && cur.ino == v->ino && cur.offset + cur.size == file_off) {
      cur.size += len;
      cur.writable = cur.writable && v->writable;
    } else {
      if (have) piece(static_cast<const FilePiece &>(cur));
      cur = FilePiece{at, len, v->dev, v->ino, file_off, v->writable};
      have = true;
    }
    at += len;
  }
  if (have) piece(static_cast<const FilePiece &>(cur));
  return true;
}

// vm.max_map_count of this host (65530 when unreadable, the kernel default).
uint64_t max_map_count();

}  // namespace rvgl
