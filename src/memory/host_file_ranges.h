// Finds which file, at which offset, backs a range of this process's address space, and an fd
// on that file among the process's own open fds (guest RAM is usually a memfd the VMM holds).
#pragma once

#include <sys/types.h>

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
};

// Looks up only the VMAs a range touches, each once per instance: one PROCMAP_QUERY per VMA
// (Linux 6.11+), so thousands of pages of one guest-RAM mapping cost one lookup, whatever the
// size of the map. Kernels without the ioctl get one read of /proc/self/maps per instance. One
// instance serves one import: the map may change between imports.
class HostFileRanges {
 public:
  enum class Source { kAny, kTextOnly };  // kTextOnly: as on kernels before 6.11 (for tests)
  static std::optional<HostFileRanges> open(Source source = Source::kAny);

  // Appends the pieces of [addr, addr + size), each inside one shared file mapping, merging a
  // piece into the last one when both file and address continue; false if any part is unmapped,
  // private or anonymous.
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
  };
  // The VMA covering addr, from the last one found, the ioctl or the text.
  const Vma *covering(uint64_t addr);
  bool load_text();

  ProcmapQuery query_;
  bool text_loaded_ = false;
  std::vector<Vma> text_;  // sorted by start, read once when the ioctl is missing
  Vma last_{};
  bool have_last_ = false;
};

// vm.max_map_count of this host (65530 when unreadable, the kernel default).
uint64_t max_map_count();

}  // namespace rvgl
