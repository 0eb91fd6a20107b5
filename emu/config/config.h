// Every knob of the emulator, read from the environment once and changeable at run time through
// rvgl_emu_set_knob(). emu/README.md documents each one.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "config/device_profile.h"

namespace rvgl::emu {

// RVGL_EMU_FAIL entry: the nth call of an ioctl (or OPEN/MMAP) fails with err.
struct FailRule {
  std::string name;
  uint64_t nth = 0;
  bool and_after = false;  // "N+" fails the Nth call and every later one
  int err = 0;
};

struct Config {
  const DeviceProfile *profile = nullptr;
  uint32_t devices = 1;
  uint32_t xccs = 0;                       // 0: the profile's default
  uint64_t vram_bytes = 0, gtt_bytes = 0;  // 0: the profile's
  uint32_t drm_minor = 64;
  std::string state_dir;

  uint64_t job_latency_us = 0;
  // From a job's end on the GPU (its user fence written) to the interrupt handler's run, which
  // records the job's VM faults and signals its fence.
  uint64_t irq_latency_us = 0;
  uint64_t lockup_timeout_ms = 2000;
  uint64_t userq_poll_us = 200;
  // From a GEM_VA that removes a mapping (and the VM's jobs submitted before it) to its
  // page-table update having run, as a user queue's engine sees it.
  uint64_t vm_update_us = 0;
  uint64_t spm_rate_hz = 1000;
  uint64_t spm_ring_bytes = 4ull << 20;
  uint64_t counters_interval_ms = 0;
  uint64_t trace = 0;
  bool vram_poison = false;
  uint32_t udmabuf_list_limit = 1024;
  uint64_t udmabuf_size_limit_mb = 64;
  uint64_t udmabuf_page_ns = 60;  // modelled kernel pinning per page (see emu/README.md)

  std::vector<FailRule> fail;
  uint64_t hang_job = 0;  // the Nth job of every context / user queue hangs
  // The Nth job of every context hangs in its waves, which the timeout handler's soft recovery
  // kills (compute and GFX rings; on SDMA, which has no soft recovery, as hang_job).
  uint64_t soft_recover_job = 0;
  // The Nth job of every context hangs so that soft recovery cannot end it; the timeout handler
  // resets that one queue (per-queue reset, Linux 6.12+) and the rest of the device goes on.
  uint64_t ring_reset_job = 0;
  // From a soft recovery's or ring reset's signal of the hung job's fence to the handler counting
  // the reset (the device's reset counter moves).
  uint64_t recovery_count_delay_us = 0;
  // 1: that count is made by the next CTX QUERY_STATE (v1) of any context, right after the query
  // read the counter (the handler's worker running exactly then): a test's way to place the count
  // between a reader's two queries.
  uint64_t recovery_count_at_query = 0;
  // How long a full GPU reset takes: from the timeout handler marking the hung context guilty and
  // moving the reset counter to the hung job's fence signalling; no ring starts a job meanwhile.
  uint64_t full_reset_us = 0;
  // vm_fault_stop=2: how long a halted job waits for the timeout handler (the kernel's
  // lockup_timeout); 0 fails it at once.
  uint64_t fault_halt_ms = 0;
  uint64_t reset_job = 0;  // the Nth job of every context is lost to an innocent GPU reset
  bool reset_vram_lost = false;
  uint64_t fault_va = 0, fault_len = 0;
  // amdgpu.vm_fault_stop: 0 never (the kernel's default), 1 as 0 on GFX9+, 2 always.
  uint64_t vm_fault_stop = 0;
  // 1: the kernel of Linux 6.5 and later, whose amdgpu_ctx_get_entity() answers an entity's error
  // (drm_sched_entity_error) to every ioctl naming it; 0: an older one.
  uint64_t entity_errors = 0;
  bool no_syncobj_eventfd = false;  // hide DRM_IOCTL_SYNCOBJ_EVENTFD as a pre-6.6 kernel does

  uint32_t xcc_count() const { return xccs ? xccs : profile->default_xccs; }
  uint64_t vram() const { return vram_bytes ? vram_bytes : profile->vram_mib << 20; }
  uint64_t gtt() const { return gtt_bytes ? gtt_bytes : profile->gtt_mib << 20; }
};

// Reads RVGL_EMU_* from the environment; unparsable values keep their defaults (and say so on
// stderr once), so a typo never silently changes what a test measures without a trace.
Config config_from_environment();

// Applies one knob by its environment name. Returns 0, -EINVAL (bad value) or -ENOENT (unknown).
int apply_knob(Config &cfg, std::string_view name, std::string_view value);

// Knobs that shape the devices themselves; they can change only while no emulated file is open.
bool knob_is_structural(std::string_view name);

// The default state directory: $TMPDIR (or /tmp) / rvgl-emu-<uid>.
std::string default_state_dir();

}  // namespace rvgl::emu
