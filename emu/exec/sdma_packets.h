// SDMA packet encodings (header OP 7:0, SUB_OP 15:8).
// Sources: drivers/gpu/drm/amd/amdgpu/sdma_v6_0_0_pkt_open.h (and the SDMA 4.x/5.x variants, which
// share these layouts), libdrm tests/amdgpu.
#pragma once

#include <cstdint>

namespace rvgl::emu::sdma {

inline uint32_t op(uint32_t h) {
  return h & 0xff;
}
inline uint32_t sub_op(uint32_t h) {
  return (h >> 8) & 0xff;
}

enum Op : uint32_t {
  OP_NOP = 0,
  OP_COPY = 1,
  OP_WRITE = 2,
  OP_INDIRECT = 4,
  OP_FENCE = 5,
  OP_TRAP = 6,
  OP_POLL_REGMEM = 8,
  OP_CONST_FILL = 11,
  OP_TIMESTAMP = 13,
};

inline constexpr uint32_t SUBOP_COPY_LINEAR = 0;
inline constexpr uint32_t SUBOP_WRITE_LINEAR = 0;
inline constexpr uint32_t SUBOP_TIMESTAMP_SET = 0, SUBOP_TIMESTAMP_GET = 1,
                          SUBOP_TIMESTAMP_GET_GLOBAL = 2;

inline uint32_t nop_count(uint32_t h) {
  return (h >> 16) & 0x3fff;
}
inline constexpr uint32_t kCopyBroadcast = 1u << 27;
// POLL_REGMEM header: FUNC 30:28, MEM_POLL 31; dword 5: INTERVAL 15:0, RETRY_COUNT 27:16.
inline uint32_t poll_func(uint32_t h) {
  return (h >> 28) & 7;
}
inline bool poll_mem(uint32_t h) {
  return (h >> 31) & 1;
}
inline uint32_t poll_retry(uint32_t d5) {
  return (d5 >> 16) & 0xfff;
}
inline constexpr uint32_t kPollRetryForever = 0xfff;
// CONST_FILL header: FILLSIZE 31:30 (log2 of the element size).
inline uint32_t fill_size_log2(uint32_t h) {
  return h >> 30;
}
inline constexpr uint32_t kIbSizeMask = 0xfffff;

// Packet lengths in dwords, header included.
inline constexpr uint32_t kCopyLinearDwords = 7;
inline constexpr uint32_t kIndirectDwords = 6;
inline constexpr uint32_t kFenceDwords = 4;
inline constexpr uint32_t kTrapDwords = 2;
inline constexpr uint32_t kPollRegmemDwords = 6;
inline constexpr uint32_t kConstFillDwords = 5;
inline constexpr uint32_t kTimestampDwords = 3;
inline constexpr uint32_t kWriteHeaderDwords = 4;

}  // namespace rvgl::emu::sdma
