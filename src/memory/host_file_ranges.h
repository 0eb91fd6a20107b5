// Finds which file, at which offset, backs a range of this process's address space, and an fd
// on that file among the process's own open fds (guest RAM is usually a memfd the VMM holds).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "util/unique_fd.h"

namespace rvgl {

struct FilePiece {
  uint64_t addr;  // host VA
  uint64_t size;
  dev_t dev;
  ino_t ino;
  uint64_t offset;  // in the file
};

class HostFileRanges {
 public:
  // Reads /proc/self/maps once.
  static std::optional<HostFileRanges> snapshot();

  // Splits [addr, addr + size) into pieces, each inside one shared file mapping; false if any
  // part is unmapped, private or anonymous.
  bool resolve(uint64_t addr, uint64_t size, std::vector<FilePiece> *out) const;

  size_t mapping_count() const { return vmas_.size(); }

  // An fd (dup'ed, owned by the caller) on the file identified by (dev, ino), found among
  // /proc/self/fd; invalid if none.
  static UniqueFd find_fd(dev_t dev, ino_t ino);

 private:
  struct Vma {
    uint64_t start, end, offset;
    dev_t dev;
    ino_t ino;
    bool shared;
  };
  std::map<uint64_t, Vma> vmas_;  // keyed by start
};

// vm.max_map_count of this host (65530 when unreadable, the kernel default).
uint64_t max_map_count();

}  // namespace rvgl
