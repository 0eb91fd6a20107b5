// The stream performance monitor of one XCP (render node), per seed 000: exclusive ownership
// (ACQUIRE/RELEASE, across processes through a lock file), destination buffers split per XCC with a
// header per slice, a per-XCC ring that overflows when nobody drains it, and a synthetic sample
// stream at a configured rate. Samples are produced lazily from the clock, so no thread runs.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

#include "amdgpu/uapi/amdgpu_drm_ext.h"
#include "spm/sample_synth.h"
#include "util/unique_fd.h"

namespace rvgl::emu {

// GET_VER and every slice header report (MAJOR << 24) | MINOR.
inline constexpr uint32_t kSpmVersion = (1u << 24) | 0u;

class SpmUnit {
 public:
  SpmUnit(int node, SpmLayout layout, uint32_t xccs) : node_(node), layout_(layout), xccs_(xccs) {}

  int acquire(uint64_t file_id, const std::string &state_dir);
  int release(uint64_t file_id);
  void release_if_owner(uint64_t file_id);
  // SET_DEST_BUF; may block up to args.timeout ms. Fills bytes_copied/has_data_loss/timeout.
  int set_dest(uint64_t file_id, rvgl_drm_amdgpu_spm_args &args);
  // In a forked child: the parent's lock file handle is the parent's business.
  void forget_after_fork();

  std::mutex &fork_lock() { return mu_; }

 private:
  struct Stream {
    bool has_slice = false;
    uint64_t slice_addr = 0;  // header goes here; data follows
    uint64_t data_cap = 0;    // bytes of data the slice holds
    uint64_t copied = 0;
    bool loss = false;
    std::deque<std::pair<uint64_t, uint64_t>> ring;  // undelivered lines: (first, count) runs
    uint64_t ring_lines = 0;
  };

  void release_locked();
  void update_locked(uint64_t now_ns);
  void deliver_locked(Stream &s, uint32_t xcc, uint64_t first, uint64_t count);
  void drain_ring_locked(Stream &s, uint32_t xcc);
  bool any_full_locked() const;
  uint64_t next_full_ns_locked() const;
  uint64_t ring_capacity_lines() const;
  double ticks_per_sample() const;

  const int node_;
  const SpmLayout layout_;
  const uint32_t xccs_;
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t owner_ = 0;  // id of the file holding the SPM, 0 if free
  UniqueFd lock_fd_;
  int busy_ = 0;  // SET_DEST_BUF calls in progress (RELEASE waits for them, as in KFD)
  bool running_ = false;
  uint64_t rate_hz_ = 0;
  uint64_t start_ns_ = 0, start_ticks_ = 0;
  uint64_t lines_emitted_ = 0;
  std::vector<Stream> streams_;
};

}  // namespace rvgl::emu
