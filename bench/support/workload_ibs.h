// The GPU work every comparison runs, identical on each side (direct libdrm_amdgpu, our context
// in-process, our context over vtest): SDMA COPY_LINEAR of 4 KiB / 64 KiB / 1 MiB from a GTT
// source into VRAM, a batch of PM4 WRITE_DATA on the compute ring, and a compute IB that ends by
// writing the GPU clock (the job's completion instant, for fence latency).
//
// All IBs live in one buffer, each at its own 4 KiB slot; only the VAs differ between sides.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <vector>

#include "amd_packets.h"

namespace rvgl::bench {

constexpr uint64_t kKiB = 1024;
constexpr uint64_t kMiB = 1024 * kKiB;
constexpr std::array<uint64_t, 3> kCopySizes = {4 * kKiB, 64 * kKiB, 1 * kMiB};
constexpr uint64_t kCopyBufferSize = 1 * kMiB;
constexpr uint64_t kIbBufferSize = 64 * kKiB;
constexpr uint64_t kTargetBufferSize = 64 * kKiB;  // WRITE_DATA targets and the clock word
constexpr uint32_t kWriteDataPackets = 32;         // per batch IB, 4 dwords each
constexpr uint64_t kClockOffset = 32 * kKiB;       // in the target buffer

struct IbSlot {
  uint64_t offset = 0;  // in the IB buffer
  uint32_t dwords = 0;
};

struct WorkloadIbs {
  std::array<IbSlot, kCopySizes.size()> copy;  // SDMA
  IbSlot write_data;                           // compute
  IbSlot clock;                                // compute
  std::vector<uint32_t> image;                 // the IB buffer's contents
};

// VAs of the side's buffers: source (GTT), destination (VRAM), targets (GTT, CPU-readable).
inline WorkloadIbs build_workload_ibs(uint64_t src_va, uint64_t dst_va, uint64_t target_va) {
  namespace pk = rvgl::packets;
  WorkloadIbs w;
  w.image.assign(kIbBufferSize / 4, 0);
  uint64_t next = 0;
  auto place = [&](const std::vector<uint32_t> &ib) {
    IbSlot s{next, static_cast<uint32_t>(ib.size())};
    std::memcpy(w.image.data() + next / 4, ib.data(), ib.size() * 4);
    next += 4 * kKiB;
    return s;
  };
  for (size_t i = 0; i < kCopySizes.size(); ++i) {
    std::vector<uint32_t> ib;
    pk::sdma_copy_linear(ib, dst_va, src_va, static_cast<uint32_t>(kCopySizes[i]));
    pk::sdma_pad(ib);
    w.copy[i] = place(ib);
  }
  std::vector<uint32_t> wd;
  for (uint32_t i = 0; i < kWriteDataPackets; ++i)
    pk::pm4_write_data(wd, target_va + i * 16, {i, i + 1, i + 2, i + 3});
  w.write_data = place(wd);
  std::vector<uint32_t> clock;
  pk::pm4_release_mem(clock, target_va + kClockOffset, 0, pk::kReleaseMemTimestamp);
  w.clock = place(clock);
  return w;
}

}  // namespace rvgl::bench
