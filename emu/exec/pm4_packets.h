// PM4 type-3 packet encodings the compute (and GFX) rings understand.
// Sources: drivers/gpu/drm/amd/amdgpu/nvd.h and soc15d.h; Mesa src/amd/common/sid.h.
#pragma once

#include <cstdint>

namespace rvgl::emu::pm4 {

inline constexpr uint32_t kType2Nop = 2;  // header type (bits 31:30) of a filler dword
inline constexpr uint32_t kType3 = 3;

inline uint32_t header_type(uint32_t h) {
  return h >> 30;
}
inline uint32_t header_count(uint32_t h) {
  return (h >> 16) & 0x3fff;
}
inline uint32_t header_opcode(uint32_t h) {
  return (h >> 8) & 0xff;
}
inline constexpr uint32_t kOneDwordNopCount = 0x3fff;  // PACKET3(NOP, 0x3FFF): a 1-dword NOP

enum Opcode : uint32_t {
  NOP = 0x10,
  INDIRECT_BUFFER_CNST = 0x33,
  WRITE_DATA = 0x37,
  WAIT_REG_MEM = 0x3c,
  INDIRECT_BUFFER = 0x3f,
  EVENT_WRITE = 0x46,
  RELEASE_MEM = 0x49,
  DMA_DATA = 0x50,
  ACQUIRE_MEM = 0x58,
};

// WRITE_DATA control dword.
inline uint32_t write_data_dst_sel(uint32_t c) {
  return (c >> 8) & 0xf;
}
inline constexpr uint32_t kWriteDataOneAddr = 1u << 16;
enum WriteDataDst : uint32_t {
  DST_REG = 0,
  DST_MEM_GRBM = 1,
  DST_TC_L2 = 2,
  DST_GDS = 3,
  DST_MEM = 5
};

// RELEASE_MEM: dword 2 carries DATA_SEL 31:29, INT_SEL 26:24, DST_SEL 17:16.
inline uint32_t release_mem_data_sel(uint32_t d) {
  return d >> 29;
}
inline uint32_t release_mem_dst_sel(uint32_t d) {
  return (d >> 16) & 3;
}
enum ReleaseMemData : uint32_t {
  DATA_NONE = 0,
  DATA_LOW32 = 1,
  DATA_64 = 2,
  DATA_GPU_CLOCK = 3,
  DATA_SYS_CLOCK = 4,
};

// DMA_DATA: control SRC_SEL 30:29, DST_SEL 21:20; command BYTE_COUNT 25:0, SAS 26, DAS 27,
// SAIC 28, DAIC 29.
inline uint32_t dma_data_src_sel(uint32_t c) {
  return (c >> 29) & 3;
}
inline uint32_t dma_data_dst_sel(uint32_t c) {
  return (c >> 20) & 3;
}
enum DmaDataSel : uint32_t { SEL_ADDR = 0, SEL_GDS = 1, SEL_DATA = 2, SEL_ADDR_L2 = 3 };
inline constexpr uint32_t kDmaDataByteCountMask = 0x03ffffff;
inline constexpr uint32_t kDmaDataSas = 1u << 26, kDmaDataDas = 1u << 27;
inline constexpr uint32_t kDmaDataSaic = 1u << 28, kDmaDataDaic = 1u << 29;

// INDIRECT_BUFFER: dword 3 IB_SIZE 19:0 (dwords), CHAIN 20, VALID 23, VMID 27:24.
inline constexpr uint32_t kIbSizeMask = 0xfffff;
inline constexpr uint32_t kIbChain = 1u << 20;

// WAIT_REG_MEM dword 1: FUNCTION 2:0, MEM_SPACE 5:4 (1 = memory).
inline uint32_t wait_function(uint32_t d) {
  return d & 7;
}
inline uint32_t wait_mem_space(uint32_t d) {
  return (d >> 4) & 3;
}

}  // namespace rvgl::emu::pm4
