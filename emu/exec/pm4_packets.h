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

// Opcodes as Mesa's src/amd/common/sid.h (PKT3_*) and the kernel's nvd.h name them.
enum Opcode : uint32_t {
  NOP = 0x10,
  SET_BASE = 0x11,
  CLEAR_STATE = 0x12,
  INDEX_BUFFER_SIZE = 0x13,
  DISPATCH_DIRECT = 0x15,
  DISPATCH_INDIRECT = 0x16,
  SET_PREDICATION = 0x20,
  DRAW_INDIRECT = 0x24,
  DRAW_INDEX_INDIRECT = 0x25,
  INDEX_BASE = 0x26,
  DRAW_INDEX_2 = 0x27,
  CONTEXT_CONTROL = 0x28,
  INDEX_TYPE = 0x2a,
  DRAW_INDIRECT_MULTI = 0x2c,
  DRAW_INDEX_AUTO = 0x2d,
  NUM_INSTANCES = 0x2f,
  DRAW_INDEX_MULTI_AUTO = 0x30,
  INDIRECT_BUFFER_CNST = 0x33,
  DRAW_INDEX_OFFSET_2 = 0x35,
  WRITE_DATA = 0x37,
  DRAW_INDEX_INDIRECT_MULTI = 0x38,
  WAIT_REG_MEM = 0x3c,
  INDIRECT_BUFFER = 0x3f,
  COPY_DATA = 0x40,
  PFP_SYNC_ME = 0x42,
  EVENT_WRITE = 0x46,
  RELEASE_MEM = 0x49,
  DISPATCH_MESH_INDIRECT_MULTI = 0x4c,
  DISPATCH_TASKMESH_GFX = 0x4d,
  DISPATCH_MESH_DIRECT = 0x4e,
  DMA_DATA = 0x50,
  CONTEXT_REG_RMW = 0x51,
  ACQUIRE_MEM = 0x58,
  LOAD_UCONFIG_REG = 0x5e,
  LOAD_SH_REG = 0x5f,
  LOAD_CONTEXT_REG = 0x61,
  LOAD_SH_REG_INDEX = 0x63,
  SET_CONFIG_REG = 0x68,
  SET_CONTEXT_REG = 0x69,
  SET_SH_REG = 0x76,
  SET_SH_REG_OFFSET = 0x77,
  SET_UCONFIG_REG = 0x79,
  SET_UCONFIG_REG_INDEX = 0x7a,
  SET_SH_REG_INDEX = 0x9b,
  LOAD_CONTEXT_REG_INDEX = 0x9f,
  DISPATCH_TASK_STATE_INIT = 0xa9,
  DISPATCH_TASKMESH_DIRECT_ACE = 0xaa,
  DISPATCH_TASKMESH_INDIRECT_MULTI_ACE = 0xad,
};

// Packets that only load register state (shadowed or immediate): with no shader core to read
// the registers they change nothing a program can observe, so they are absorbed.
inline bool is_register_state(uint32_t op) {
  switch (op) {
    case SET_BASE:
    case CLEAR_STATE:
    case INDEX_BUFFER_SIZE:
    case SET_PREDICATION:
    case INDEX_BASE:
    case CONTEXT_CONTROL:
    case INDEX_TYPE:
    case NUM_INSTANCES:
    case PFP_SYNC_ME:
    case CONTEXT_REG_RMW:
    case LOAD_UCONFIG_REG:
    case LOAD_SH_REG:
    case LOAD_CONTEXT_REG:
    case LOAD_SH_REG_INDEX:
    case SET_CONFIG_REG:
    case SET_CONTEXT_REG:
    case SET_SH_REG:
    case SET_SH_REG_OFFSET:
    case SET_UCONFIG_REG:
    case SET_UCONFIG_REG_INDEX:
    case SET_SH_REG_INDEX:
    case LOAD_CONTEXT_REG_INDEX:
    case DISPATCH_TASK_STATE_INIT:
      return true;
    default:
      return false;
  }
}

// Packets that launch shader waves (dispatches, draws, mesh/task): the emulator has no shader
// core, so they fail the job the way a hang does.
inline bool needs_shaders(uint32_t op) {
  switch (op) {
    case DISPATCH_DIRECT:
    case DISPATCH_INDIRECT:
    case DRAW_INDIRECT:
    case DRAW_INDEX_INDIRECT:
    case DRAW_INDEX_2:
    case DRAW_INDIRECT_MULTI:
    case DRAW_INDEX_AUTO:
    case DRAW_INDEX_MULTI_AUTO:
    case DRAW_INDEX_OFFSET_2:
    case DRAW_INDEX_INDIRECT_MULTI:
    case DISPATCH_MESH_INDIRECT_MULTI:
    case DISPATCH_TASKMESH_GFX:
    case DISPATCH_MESH_DIRECT:
    case DISPATCH_TASKMESH_DIRECT_ACE:
    case DISPATCH_TASKMESH_INDIRECT_MULTI_ACE:
      return true;
    default:
      return false;
  }
}

// COPY_DATA control dword (sid.h): SRC_SEL 3:0, DST_SEL 11:8, COUNT_SEL 16 (64-bit).
inline uint32_t copy_data_src_sel(uint32_t c) {
  return c & 0xf;
}
inline uint32_t copy_data_dst_sel(uint32_t c) {
  return (c >> 8) & 0xf;
}
inline constexpr uint32_t kCopyDataCount64 = 1u << 16;
enum CopyDataSel : uint32_t {
  COPY_REG = 0,
  COPY_SRC_MEM = 1,
  COPY_TC_L2 = 2,
  COPY_GDS = 3,
  COPY_PERF = 4,
  COPY_IMM = 5,
  COPY_TIMESTAMP = 9,
  COPY_DST_MEM = 5,
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
inline constexpr uint32_t SEL_NOWHERE = 2;  // as a destination
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
