// Makes guest pages, given as the VMM's iovecs, GPU-visible without copying (DESIGN.md D4).
//
// After coalescing iovecs that are adjacent in host VA, the layout decides:
//  - few ranges:  one userptr object per range, stitched at consecutive GPU VAs when mapped;
//  - many ranges backed by a shared file (memfd guest RAM): one contiguous host alias of the same
//    file pages (MAP_SHARED|MAP_FIXED pieces in one reserved range) under a single userptr
//    object, while the process's map count allows it; else udmabufs of (memfd, offset, size)
//    items imported as dma-bufs (kernel limits: items per udmabuf, shrink seal required);
//  - otherwise one object per range.
// The VMM's iovec array is not kept and its mappings are never moved or unmapped.
#pragma once

#include <sys/uio.h>

#include <cstdint>
#include <memory>
#include <span>

#include "memory/memory_object.h"

namespace rvgl {

enum class UserptrStrategy { kStitched, kAlias, kUdmabuf };

const char *userptr_strategy_name(UserptrStrategy s);

struct UserptrOptions {
  uint32_t stitch_max_ranges = 8;            // up to this many ranges: one object per range
  uint32_t max_objects = 4096;               // never create more host objects than this
  uint32_t udmabuf_max_items = 1024;         // the kernel's default udmabuf list_limit
  uint64_t udmabuf_max_bytes = 64ull << 20;  // the kernel's default size_limit_mb
  bool allow_alias = true;
  bool allow_udmabuf = true;
};

struct UserptrResult {
  std::shared_ptr<MemoryObject> object;
  UserptrStrategy strategy = UserptrStrategy::kStitched;
  uint32_t ranges = 0;  // after coalescing
};

// 0 or: -EINVAL (empty, unaligned or overflowing iovecs), -EFAULT (pages not mapped), -ENOSPC
// (would need more than max_objects objects), or the kernel's error.
int import_userptr(const std::shared_ptr<AmdgpuDevice> &dev, std::span<const iovec> iov,
                   bool read_only, const UserptrOptions &opt, UserptrResult *out);

}  // namespace rvgl
