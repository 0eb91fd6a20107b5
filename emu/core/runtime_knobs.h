// The knobs worker threads read while they run, kept in atomics so rvgl_emu_set_knob() can change
// them without stopping anything.
#pragma once

#include <atomic>
#include <cstdint>

#include "config/config.h"

namespace rvgl::emu {

struct RuntimeKnobs {
  std::atomic<uint64_t> job_latency_us{0};
  std::atomic<uint64_t> irq_latency_us{0};
  std::atomic<uint64_t> lockup_timeout_ms{2000};
  std::atomic<uint64_t> userq_poll_us{200};
  std::atomic<uint64_t> vm_update_us{0};
  std::atomic<uint64_t> counters_interval_ms{0};
  std::atomic<uint64_t> trace{0};  // 1: failing ioctls to stderr, 2: every ioctl
  std::atomic<uint64_t> spm_rate_hz{1000};
  std::atomic<uint64_t> spm_ring_bytes{4ull << 20};
  std::atomic<uint64_t> hang_job{0};
  std::atomic<uint64_t> soft_recover_job{0};
  std::atomic<uint64_t> ring_reset_job{0};
  std::atomic<uint64_t> recovery_count_delay_us{0};
  std::atomic<uint64_t> recovery_count_at_query{0};
  std::atomic<uint64_t> full_reset_us{0};
  std::atomic<uint64_t> fault_halt_ms{0};
  std::atomic<uint64_t> reset_job{0};
  std::atomic<bool> reset_vram_lost{false};
  std::atomic<uint64_t> fault_va{0};
  std::atomic<uint64_t> fault_len{0};
  std::atomic<bool> vram_poison{false};
  std::atomic<uint32_t> udmabuf_list_limit{1024};
  std::atomic<uint64_t> udmabuf_size_limit_mb{64};
  std::atomic<uint64_t> udmabuf_page_ns{60};
  std::atomic<uint64_t> vm_fault_stop{0};
  std::atomic<uint64_t> entity_errors{0};
  std::atomic<bool> no_syncobj_eventfd{false};

  void load(const Config &c) {
    job_latency_us = c.job_latency_us;
    irq_latency_us = c.irq_latency_us;
    lockup_timeout_ms = c.lockup_timeout_ms;
    userq_poll_us = c.userq_poll_us;
    vm_update_us = c.vm_update_us;
    counters_interval_ms = c.counters_interval_ms;
    trace = c.trace;
    spm_rate_hz = c.spm_rate_hz;
    spm_ring_bytes = c.spm_ring_bytes;
    hang_job = c.hang_job;
    soft_recover_job = c.soft_recover_job;
    ring_reset_job = c.ring_reset_job;
    recovery_count_delay_us = c.recovery_count_delay_us;
    recovery_count_at_query = c.recovery_count_at_query;
    full_reset_us = c.full_reset_us;
    fault_halt_ms = c.fault_halt_ms;
    reset_job = c.reset_job;
    reset_vram_lost = c.reset_vram_lost;
    fault_va = c.fault_va;
    fault_len = c.fault_len;
    vram_poison = c.vram_poison;
    udmabuf_list_limit = c.udmabuf_list_limit;
    udmabuf_size_limit_mb = c.udmabuf_size_limit_mb;
    udmabuf_page_ns = c.udmabuf_page_ns;
    vm_fault_stop = c.vm_fault_stop;
    entity_errors = c.entity_errors;
    no_syncobj_eventfd = c.no_syncobj_eventfd;
  }
};

RuntimeKnobs &knobs();

// Starts the counters-file writer if RVGL_EMU_COUNTERS_INTERVAL_MS asks for one (api/).
void note_device_opened();

}  // namespace rvgl::emu
