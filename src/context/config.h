// Host configuration: where the GPU is, which capset id to answer, per-context quotas.
// Read once from the environment (docs/configuration.md lists every variable).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace rvgl {

class CaptureBudget;

struct ContextLimits {
  uint32_t max_objects = 16384;              // BOs + userptr/imported resources
  uint64_t max_vram_bytes = 64ull << 30;     // also bounded by the device
  uint64_t max_gtt_bytes = 8ull << 30;       // host RAM the GPU may use for this guest
  uint64_t max_userptr_bytes = 64ull << 30;  // guest RAM registered with the GPU
  uint32_t max_queues = 62;                  // every queue needs its own ring index
  // Doorbell objects come from the device's doorbell aperture, which every process of the host
  // shares: a page per queue is more than user queues need (one page holds 512 doorbells).
  uint64_t max_doorbell_bytes = 62 * 4096;
  // The same for every context of the VMM process together: the aperture (PCI BAR 2,
  // amdgpu_doorbell_init()) is a few MiB, and native ROCm processes need their share of it.
  uint64_t max_process_doorbell_bytes = 1024 * 1024;
  // Kernel GPU VA mappings (a VA_MAP of a scattered userptr blob is one per piece): each is host
  // bookkeeping, a kernel mapping and its page-table entries.
  uint32_t max_va_mappings = 65536;
  // Bytes of GPU VA mapped, counted per mapping (one object mapped twice counts twice): the
  // kernel's page tables grow with it. Default: the three memory quotas together.
  uint64_t max_va_bytes = (64ull << 30) + (8ull << 30) + (64ull << 30);
  uint32_t max_submit_bytes = 1u << 20;  // one command buffer
  uint32_t max_ibs_per_submit = 64;
  uint32_t max_waits_per_submit = 64;
};

struct Config {
  std::string render_node;        // RVGL_RENDER_NODE; empty: first amdgpu render node
  uint32_t capset_id = 8;         // RVGL_CAPSET_ID
  bool compute_only = false;      // RVGL_COMPUTE_ONLY: hooks drop GL and set NO_VIRGL
  uint32_t num_xcc_override = 0;  // RVGL_NUM_XCC: XCCs per partition when the table is wrong
  std::string capture_dir;        // RVGL_CAPTURE_DIR: write every submit there (trace tool)
  // RVGL_CAPTURE_MAX_MB: what the process's capture files may take together.
  uint64_t capture_max_bytes = 1ull << 30;
  // The budget the context's capture file takes from; null: the process's (CaptureBudget).
  std::shared_ptr<CaptureBudget> capture_budget;
  ContextLimits limits;

  static Config from_env();
};

}  // namespace rvgl
