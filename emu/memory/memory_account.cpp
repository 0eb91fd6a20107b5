#include "memory/memory_account.h"

namespace rvgl::emu {

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
