// PROCMAP_QUERY (Linux 6.11): struct procmap_query and its flags, as include/uapi/linux/fs.h
// defines them and fs/proc/task_mmu.c do_procmap_query() fills them; Debian 12's headers predate
// it. One home for the product (src/amdgpu/procmap_query.cpp) and the emulator
// (emu/util/proc_maps.cpp).
#pragma once

#include <linux/ioctl.h>

#include <cstdint>

namespace rvgl::uapi {

struct ProcmapQueryArg {
  uint64_t size;
  uint64_t query_flags;
  uint64_t query_addr;
  uint64_t vma_start;
  uint64_t vma_end;
  uint64_t vma_flags;
  uint64_t vma_page_size;
  uint64_t vma_offset;
  uint64_t inode;
  uint32_t dev_major;
  uint32_t dev_minor;
  uint32_t vma_name_size;
  uint32_t build_id_size;
  uint64_t vma_name_addr;
  uint64_t build_id_addr;
};
static_assert(sizeof(ProcmapQueryArg) == 104);

constexpr unsigned long kProcmapQuery = _IOWR('f', 17, ProcmapQueryArg);
// enum procmap_query_flags
constexpr uint64_t kVmaReadable = 0x01;
constexpr uint64_t kVmaWritable = 0x02;
constexpr uint64_t kVmaExecutable = 0x04;
constexpr uint64_t kVmaShared = 0x08;

}  // namespace rvgl::uapi
