// Per-device memory accounting by domain, as INFO VRAM_USAGE / GTT_USAGE / MEMORY report it and
// as GEM_CREATE checks it (a full VRAM falls back to GTT, a full GTT fails with ENOMEM).
// The kernel's own pinned objects (firmware, page tables, rings) are charged from the start, as
// the TTM managers count them: usage includes them and userspace can never allocate them.
#pragma once

#include <atomic>
#include <cstdint>

namespace rvgl::emu {

class MemoryAccount {
 public:
  MemoryAccount(uint64_t vram, uint64_t gtt, uint64_t doorbell, uint64_t vram_pinned = 0,
                uint64_t gtt_pinned = 0);

  enum class Pool { Vram, Gtt, Doorbell, None };
  bool charge(Pool pool, uint64_t bytes);
  void release(Pool pool, uint64_t bytes);

  uint64_t total(Pool p) const;
  uint64_t used(Pool p) const;  // including the kernel's pinned objects
  uint64_t pinned(Pool p) const;

 private:
  std::atomic<uint64_t> *counter(Pool p);
  const std::atomic<uint64_t> *counter(Pool p) const;

  uint64_t vram_total_, gtt_total_, doorbell_total_;
  uint64_t vram_pinned_, gtt_pinned_;
  std::atomic<uint64_t> vram_used_{0}, gtt_used_{0}, doorbell_used_{0};
};

}  // namespace rvgl::emu
