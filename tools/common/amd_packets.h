// Builders for the PM4 type-3 and SDMA packets guest IBs are made of: what a guest driver (and
// our demo, tests and benchmarks) write into command buffers. Independent of emu/'s decoder on
// purpose, so each checks the other.
//
// Sources (facts only): Mesa src/amd/common/sid.h (PKT3 opcodes and fields), the kernel's
// drivers/gpu/drm/amd/amdgpu/nvd.h and soc15d.h, sdma_v6_0_0_pkt_open.h (SDMA ops and the
// COPY_LINEAR count, bytes - 1, 30 bits), libdrm 2.4.114 tests/amdgpu (hand-built SDMA/PM4).
#pragma once

#include <cstdint>
#include <vector>

namespace rvgl::packets {

// ---- PM4 type 3 ----
constexpr uint32_t kPkt3Nop = 0x10;
constexpr uint32_t kPkt3IndirectBuffer = 0x3F;
constexpr uint32_t kPkt3WriteData = 0x37;
constexpr uint32_t kPkt3EventWrite = 0x46;
constexpr uint32_t kPkt3ReleaseMem = 0x49;
constexpr uint32_t kPkt3DmaData = 0x50;

// body_dwords: dwords after the header.
constexpr uint32_t pkt3(uint32_t op, uint32_t body_dwords, bool compute = true) {
  return (3u << 30) | (((body_dwords - 1) & 0x3FFF) << 16) | ((op & 0xFF) << 8) |
         (compute ? (1u << 1) : 0u);
}

constexpr uint32_t kWriteDataDstSelMem = 5;      // V_370_MEM
constexpr uint32_t kEventBottomOfPipeTs = 0x28;  // V_028A90_BOTTOM_OF_PIPE_TS
constexpr uint32_t kEventCsPartialFlush = 0x07;  // V_028A90_CS_PARTIAL_FLUSH
constexpr uint32_t kReleaseMemData32 = 1;        // DATA_SEL: send 32-bit low
constexpr uint32_t kReleaseMemData64 = 2;        // DATA_SEL: send 64-bit data
constexpr uint32_t kReleaseMemTimestamp = 3;     // DATA_SEL: 64-bit GPU counter

inline void pm4_nop(std::vector<uint32_t> &ib, uint32_t body_dwords) {
  ib.push_back(pkt3(kPkt3Nop, body_dwords));
  ib.insert(ib.end(), body_dwords, 0);
}

// Writes `data` to GPU VA `va` (memory destination, write confirm).
inline void pm4_write_data(std::vector<uint32_t> &ib, uint64_t va,
                           const std::vector<uint32_t> &data) {
  ib.push_back(pkt3(kPkt3WriteData, 3 + static_cast<uint32_t>(data.size())));
  ib.push_back((kWriteDataDstSelMem << 8) | (1u << 20));
  ib.push_back(static_cast<uint32_t>(va));
  ib.push_back(static_cast<uint32_t>(va >> 32));
  ib.insert(ib.end(), data.begin(), data.end());
}

// End-of-pipe write of a 32- or 64-bit value (or the GPU clock) to `va` (gfx9+ layout: 7 dwords).
inline void pm4_release_mem(std::vector<uint32_t> &ib, uint64_t va, uint64_t value,
                            uint32_t data_sel = kReleaseMemData64) {
  ib.push_back(pkt3(kPkt3ReleaseMem, 7));
  ib.push_back(kEventBottomOfPipeTs | (5u << 8));  // EVENT_INDEX 5: end of pipe
  ib.push_back(data_sel << 29);                    // DATA_SEL, DST_SEL 0 (memory), INT_SEL 0
  ib.push_back(static_cast<uint32_t>(va));
  ib.push_back(static_cast<uint32_t>(va >> 32));
  ib.push_back(static_cast<uint32_t>(value));
  ib.push_back(static_cast<uint32_t>(value >> 32));
  ib.push_back(0);
}

inline void pm4_event_write(std::vector<uint32_t> &ib, uint32_t event, uint32_t index = 4) {
  ib.push_back(pkt3(kPkt3EventWrite, 1));
  ib.push_back(event | (index << 8));
}

// CP DMA copy of `bytes` from src to dst (gfx9+: BYTE_COUNT is 26 bits, SRC_SEL/DST_SEL 0 =
// address).
inline void pm4_dma_data(std::vector<uint32_t> &ib, uint64_t dst, uint64_t src, uint32_t bytes) {
  ib.push_back(pkt3(kPkt3DmaData, 6));
  ib.push_back(1u << 31);  // CP_SYNC
  ib.push_back(static_cast<uint32_t>(src));
  ib.push_back(static_cast<uint32_t>(src >> 32));
  ib.push_back(static_cast<uint32_t>(dst));
  ib.push_back(static_cast<uint32_t>(dst >> 32));
  ib.push_back(bytes & 0x3FFFFFF);
}

// Chains to (or calls) another IB of `dwords` at `va`.
inline void pm4_indirect_buffer(std::vector<uint32_t> &ib, uint64_t va, uint32_t dwords) {
  ib.push_back(pkt3(kPkt3IndirectBuffer, 3));
  ib.push_back(static_cast<uint32_t>(va) & ~3u);
  ib.push_back(static_cast<uint32_t>(va >> 32) & 0xFFFF);
  ib.push_back((dwords & 0xFFFFF) | (1u << 23));  // IB_SIZE, VALID (gfx10+)
}

// ---- SDMA (v4.4 / v5 / v6 layouts) ----
constexpr uint32_t kSdmaOpNop = 0;
constexpr uint32_t kSdmaOpCopy = 1;
constexpr uint32_t kSdmaOpWrite = 2;
constexpr uint32_t kSdmaOpFence = 5;
constexpr uint32_t kSdmaOpTrap = 6;
constexpr uint32_t kSdmaOpPollRegmem = 8;
constexpr uint32_t kSdmaOpConstFill = 11;
constexpr uint32_t kSdmaSubOpLinear = 0;

constexpr uint32_t sdma_header(uint32_t op, uint32_t sub_op = 0) {
  return op | (sub_op << 8);
}

inline void sdma_nop(std::vector<uint32_t> &ib) {
  ib.push_back(sdma_header(kSdmaOpNop));
}

inline void sdma_copy_linear(std::vector<uint32_t> &ib, uint64_t dst, uint64_t src,
                             uint32_t bytes) {
  ib.push_back(sdma_header(kSdmaOpCopy, kSdmaSubOpLinear));
  ib.push_back((bytes - 1) & 0x3FFFFFFF);
  ib.push_back(0);  // parameter: no swaps
  ib.push_back(static_cast<uint32_t>(src));
  ib.push_back(static_cast<uint32_t>(src >> 32));
  ib.push_back(static_cast<uint32_t>(dst));
  ib.push_back(static_cast<uint32_t>(dst >> 32));
}

inline void sdma_write_linear(std::vector<uint32_t> &ib, uint64_t dst,
                              const std::vector<uint32_t> &data) {
  ib.push_back(sdma_header(kSdmaOpWrite, kSdmaSubOpLinear));
  ib.push_back(static_cast<uint32_t>(dst));
  ib.push_back(static_cast<uint32_t>(dst >> 32));
  ib.push_back(static_cast<uint32_t>(data.size() - 1));
  ib.insert(ib.end(), data.begin(), data.end());
}

inline void sdma_const_fill(std::vector<uint32_t> &ib, uint64_t dst, uint32_t value,
                            uint32_t bytes) {
  ib.push_back(sdma_header(kSdmaOpConstFill) | (2u << 30));  // fill size: dword
  ib.push_back(static_cast<uint32_t>(dst));
  ib.push_back(static_cast<uint32_t>(dst >> 32));
  ib.push_back(value);
  ib.push_back((bytes - 1) & 0x3FFFFFFF);
}

inline void sdma_fence(std::vector<uint32_t> &ib, uint64_t va, uint32_t value) {
  ib.push_back(sdma_header(kSdmaOpFence));
  ib.push_back(static_cast<uint32_t>(va));
  ib.push_back(static_cast<uint32_t>(va >> 32));
  ib.push_back(value);
}

inline void sdma_trap(std::vector<uint32_t> &ib) {
  ib.push_back(sdma_header(kSdmaOpTrap));
  ib.push_back(0);
}

// Waits until (*va & mask) == ref (memory poll, function "equal").
inline void sdma_poll_mem_equal(std::vector<uint32_t> &ib, uint64_t va, uint32_t ref,
                                uint32_t mask) {
  ib.push_back(sdma_header(kSdmaOpPollRegmem) | (3u << 28) | (1u << 31));
  ib.push_back(static_cast<uint32_t>(va));
  ib.push_back(static_cast<uint32_t>(va >> 32));
  ib.push_back(ref);
  ib.push_back(mask);
  ib.push_back(10 | (0xfffu << 16));  // poll interval, retry count
}

// SDMA IBs are padded to a multiple of 8 dwords with NOPs.
inline void sdma_pad(std::vector<uint32_t> &ib) {
  while (ib.size() % 8)
    sdma_nop(ib);
}

}  // namespace rvgl::packets
