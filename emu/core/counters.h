// What the emulated GPU did, for tests that assert on effects rather than return codes.
#pragma once

#include <atomic>
#include <cstdint>

namespace rvgl::emu {

struct Counters {
  std::atomic<uint64_t> bos_alive{0};
  std::atomic<uint64_t> bos_created{0};
  std::atomic<uint64_t> userptr_alive{0};
  std::atomic<uint64_t> bytes_copied{0};    // by copy packets (COPY_LINEAR, DMA_DATA)
  std::atomic<uint64_t> bytes_written{0};   // by fills and data writes
  std::atomic<uint64_t> jobs_submitted{0};  // CS jobs: submitted = completed + failed + running
  std::atomic<uint64_t> jobs_completed{0};
  std::atomic<uint64_t> jobs_failed{0};
  std::atomic<uint64_t> vm_faults{0};
  std::atomic<uint64_t> gpu_resets{0};
  std::atomic<uint64_t> udmabufs_alive{0};
  std::atomic<uint64_t> udmabufs_created{0};
  std::atomic<uint64_t> device_files_open{0};
  std::atomic<uint64_t> contexts_alive{0};
  std::atomic<uint64_t> syncobjs_alive{0};
  std::atomic<uint64_t> userqs_alive{0};
  std::atomic<uint64_t> userq_packets{0};
  std::atomic<uint64_t> ioctls{0};
  std::atomic<uint64_t> injected_failures{0};
  std::atomic<uint64_t> spm_bytes{0};
  std::atomic<uint64_t> dmabuf_exports{0};
  std::atomic<uint64_t> dmabuf_imports{0};
  std::atomic<uint64_t> syncobj_eventfds_registered{0};
  std::atomic<uint64_t> syncobj_eventfds_signalled{0};
  std::atomic<uint64_t> userq_batches_completed{0};
  std::atomic<uint64_t> userq_batches_failed{0};
};

// The one set of counters of this process (never destroyed: worker threads may outlive exit()).
Counters &counters();

}  // namespace rvgl::emu
