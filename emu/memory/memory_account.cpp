#include "memory/memory_account.h"

#include <algorithm>

namespace rvgl::emu {

// A pin never takes more than an eighth of a (deliberately small) configured pool.
MemoryAccount::MemoryAccount(uint64_t vram, uint64_t gtt, uint64_t doorbell, uint64_t vram_pinned,
                             uint64_t gtt_pinned)
    : vram_total_(vram),
      gtt_total_(gtt),
      doorbell_total_(doorbell),
      vram_pinned_(std::min(vram_pinned, vram / 8)),
      gtt_pinned_(std::min(gtt_pinned, gtt / 8)),
      vram_used_(vram_pinned_),
      gtt_used_(gtt_pinned_) {}

uint64_t MemoryAccount::pinned(Pool p) const {
  switch (p) {
    case Pool::Vram:
      return vram_pinned_;
    case Pool::Gtt:
      return gtt_pinned_;
    default:
      return 0;
  }
}

std::atomic<uint64_t> *MemoryAccount::counter(Pool p) {
  switch (p) {
    case Pool::Vram:
      return &vram_used_;
    case Pool::Gtt:
      return &gtt_used_;
    case Pool::Doorbell:
      return &doorbell_used_;
    case Pool::None:
      break;
  }
  return nullptr;
}

const std::atomic<uint64_t> *MemoryAccount::counter(Pool p) const {
  return const_cast<MemoryAccount *>(this)->counter(p);
}

uint64_t MemoryAccount::total(Pool p) const {
  switch (p) {
    case Pool::Vram:
      return vram_total_;
    case Pool::Gtt:
      return gtt_total_;
    case Pool::Doorbell:
      return doorbell_total_;
    case Pool::None:
      break;
  }
  return 0;
}

uint64_t MemoryAccount::used(Pool p) const {
  const auto *c = counter(p);
  return c ? c->load(std::memory_order_relaxed) : 0;
}

bool MemoryAccount::charge(Pool pool, uint64_t bytes) {
  auto *c = counter(pool);
  if (!c) return true;
  const uint64_t limit = total(pool);
  uint64_t cur = c->load(std::memory_order_relaxed);
  do {
    if (bytes > limit || cur > limit - bytes) return false;
  } while (!c->compare_exchange_weak(cur, cur + bytes, std::memory_order_relaxed));
  return true;
}

void MemoryAccount::release(Pool pool, uint64_t bytes) {
  if (auto *c = counter(pool)) c->fetch_sub(bytes, std::memory_order_relaxed);
}

}  // namespace rvgl::emu
