// Makes guest pages, given as the VMM's iovecs, GPU-visible without copying (DESIGN.md D4).
//
// After coalescing iovecs that are adjacent in host VA, the layout decides:
//  - few ranges:  one userptr object per range, stitched at consecutive GPU VAs when mapped;
//  - many ranges backed by a shared file (memfd guest RAM): whichever of two zero-copy imports
//    costs less by ImportCosts: one contiguous host alias of the same file pages
//    (MAP_SHARED|MAP_FIXED pieces in one reserved range) under a single userptr object — one mmap
//    per piece, so it suits few large pieces, and only while the process's map count allows it —
//    or udmabufs of (memfd, offset, size) items imported as dma-bufs — per-page pinning in the
//    kernel, so it suits many small pieces (kernel limits: items and bytes per udmabuf, shrink
//    seal required);
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

// What each import costs, in ns, from the figures measured for issue 14 on the reference VM
// (bench/bench_userptr.cpp, perf): mmap(MAP_FIXED) of one alias piece about 4 us (VMA split and
// interval-tree insert), the kernel's udmabuf pinning 0.06-0.28 us per 4 KiB page
// (BM_KernelPagePin: bulk, and one page per item), and each udmabuf's CREATE_LIST + PRIME import
// a fixed cost of the order of a few syscalls.
struct ImportCosts {
  double alias_per_piece_ns = 4000;
  double udmabuf_per_page_ns = 300;
  double udmabuf_per_buffer_ns = 20000;
};

struct UserptrOptions {
  uint32_t stitch_max_ranges = 8;            // up to this many ranges: one object per range
  uint32_t max_objects = 4096;               // never create more host objects than this
  uint32_t udmabuf_max_items = 1024;         // the kernel's default udmabuf list_limit
  uint64_t udmabuf_max_bytes = 64ull << 20;  // the kernel's default size_limit_mb
  bool allow_alias = true;
  bool allow_udmabuf = true;
  ImportCosts costs;
};

struct UserptrResult {
  std::shared_ptr<MemoryObject> object;
  UserptrStrategy strategy = UserptrStrategy::kStitched;
  uint32_t ranges = 0;  // after coalescing
  uint32_t pieces = 0;  // file pieces behind them (alias / udmabuf candidates)
};

// The strategy ImportCosts prefers for `pieces` file pieces over `bytes`, given which imports are
// possible; kStitched when neither is.
UserptrStrategy choose_file_import(uint64_t pieces, uint64_t bytes, bool alias_ok, bool udmabuf_ok,
                                   const UserptrOptions &opt);

// 0 or: -EINVAL (empty, unaligned or overflowing iovecs), -EFAULT (pages not mapped), -ENOSPC
// (would need more than max_objects objects), or the kernel's error.
int import_userptr(const std::shared_ptr<AmdgpuDevice> &dev, std::span<const iovec> iov,
                   bool read_only, const UserptrOptions &opt, UserptrResult *out);

}  // namespace rvgl
