#include "memory/backing.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

#include "core/counters.h"
#include "interpose/real_libc.h"
#include "util/proc_maps.h"
#include "util/user_memory.h"

namespace rvgl::emu {

namespace {

// Engines of one GPU poll and write the same dwords at once (a semaphore in memory one engine
// waits on and another writes): small aligned accesses are dword-sized and single-copy atomic,
// as the hardware's are; bulk data moves as bytes.
constexpr uint64_t kDwordAccessMax = 64;

bool dword_access(uint64_t offset, uint64_t len) {
  return len <= kDwordAccessMax && offset % 4 == 0 && len % 4 == 0;
}

}  // namespace

bool Backing::read(uint64_t offset, void *dst, uint64_t len) {
  if (offset > size_ || len > size_ - offset) return false;
  if (uint8_t *v = view()) {
    if (dword_access(offset, len)) {
      for (uint64_t i = 0; i < len; i += 4) {
        const uint32_t d = std::atomic_ref<uint32_t>(*reinterpret_cast<uint32_t *>(v + offset + i))
                               .load(std::memory_order_relaxed);
        std::memcpy(static_cast<uint8_t *>(dst) + i, &d, 4);
      }
      return true;
    }
    std::memcpy(dst, v + offset, len);
    return true;
  }
  return copy_from_user(dst, user_address() + offset, len) == 0;
}

bool Backing::write(uint64_t offset, const void *src, uint64_t len) {
  if (offset > size_ || len > size_ - offset) return false;
  if (uint8_t *v = view()) {
    if (dword_access(offset, len)) {
      for (uint64_t i = 0; i < len; i += 4) {
        uint32_t d;
        std::memcpy(&d, static_cast<const uint8_t *>(src) + i, 4);
        std::atomic_ref<uint32_t>(*reinterpret_cast<uint32_t *>(v + offset + i))
            .store(d, std::memory_order_relaxed);
      }
      return true;
    }
    std::memcpy(v + offset, src, len);
    return true;
  }
  return copy_to_user(user_address() + offset, src, len) == 0;
}

bool Backing::write_fence(uint64_t offset, uint64_t value) {
  uint8_t *v = view();
  if (!v || offset % 8 || offset > size_ || 8 > size_ - offset)
    return write(offset, &value, sizeof(value));
  std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t *>(v + offset))
      .store(value, std::memory_order_release);
  return true;
}

std::shared_ptr<MemfdBacking> MemfdBacking::create(const char *name, uint64_t size) {
  UniqueFd fd(memfd_create(name, MFD_CLOEXEC));
  if (!fd) return nullptr;
  if (ftruncate(fd.get(), static_cast<off_t>(size)) != 0) return nullptr;
  return std::shared_ptr<MemfdBacking>(new MemfdBacking(std::move(fd), size));
}

std::shared_ptr<MemfdBacking> MemfdBacking::adopt(UniqueFd fd, uint64_t size) {
  return std::shared_ptr<MemfdBacking>(new MemfdBacking(std::move(fd), size));
}

MemfdBacking::~MemfdBacking() {
  if (view_) munmap(view_, size());
}

uint8_t *MemfdBacking::view() {
  std::call_once(view_once_, [this] {
    void *p = real::mmap(nullptr, size(), PROT_READ | PROT_WRITE, MAP_SHARED, fd_.get(), 0);
    if (p != MAP_FAILED) view_ = static_cast<uint8_t *>(p);
  });
  return view_;
}

void *MemfdBacking::cpu_map(void *addr, size_t len, int prot, int flags, uint64_t offset) {
  return real::mmap(addr, len, prot, flags, fd_.get(), static_cast<off_t>(offset));
}

std::shared_ptr<SegmentBacking> SegmentBacking::create(std::vector<Segment> segments,
                                                       UniqueFd handle) {
  uint64_t total = 0;
  for (const auto &s : segments)
    total += s.size;
  counters().udmabufs_alive.fetch_add(1, std::memory_order_relaxed);
  counters().udmabufs_created.fetch_add(1, std::memory_order_relaxed);
  return std::shared_ptr<SegmentBacking>(
      new SegmentBacking(std::move(segments), total, std::move(handle)));
}

SegmentBacking::~SegmentBacking() {
  if (view_) munmap(view_, size());
  counters().udmabufs_alive.fetch_sub(1, std::memory_order_relaxed);
}

bool SegmentBacking::map_range(uint8_t *at, uint64_t offset, uint64_t len, int prot) {
  uint64_t seg_start = 0;
  for (const auto &s : segments_) {
    const uint64_t seg_end = seg_start + s.size;
    const uint64_t lo = std::max(seg_start, offset), hi = std::min(seg_end, offset + len);
    if (lo < hi) {
      void *p = real::mmap(at + (lo - offset), hi - lo, prot, MAP_SHARED | MAP_FIXED, s.file->get(),
                           static_cast<off_t>(s.offset + (lo - seg_start)));
      if (p == MAP_FAILED) return false;
    }
    seg_start = seg_end;
  }
  return true;
}

uint8_t *SegmentBacking::view() {
  std::call_once(view_once_, [this] {
    void *p =
        real::mmap(nullptr, size(), PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return;
    if (!map_range(static_cast<uint8_t *>(p), 0, size(), PROT_READ | PROT_WRITE)) {
      munmap(p, size());
      return;
    }
    view_ = static_cast<uint8_t *>(p);
  });
  return view_;
}

void *SegmentBacking::cpu_map(void *addr, size_t len, int prot, int flags, uint64_t offset) {
  if (offset > size() || len > size() - offset) {
    errno = EINVAL;
    return MAP_FAILED;
  }
  // Reserve the whole range first (honouring MAP_FIXED/hints), then lay the pieces over it.
  const int reserve_flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | (flags & MAP_FIXED);
  void *base = real::mmap(addr, len, PROT_NONE, reserve_flags, -1, 0);
  if (base == MAP_FAILED) return MAP_FAILED;
  if (!map_range(static_cast<uint8_t *>(base), offset, len, prot)) {
    const int err = errno;
    munmap(base, len);
    errno = err;
    return MAP_FAILED;
  }
  return base;
}

void *UserptrBacking::cpu_map(void *, size_t, int, int, uint64_t) {
  errno = EPERM;
  return MAP_FAILED;
}

int UserptrBacking::get_user_pages() const {
  return user_pages_error(addr_, size(), readonly_, anon_only_);
}

}  // namespace rvgl::emu
