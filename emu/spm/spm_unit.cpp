#include "spm/spm_unit.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/counters.h"
#include "core/runtime_knobs.h"
#include "interpose/real_libc.h"
#include "util/clock.h"
#include "util/user_memory.h"

namespace rvgl::emu {

int SpmUnit::acquire(uint64_t file_id, const std::string &state_dir) {
  std::lock_guard lk(mu_);
  if (owner_) return -EBUSY;
  // The arbitration the kernel does across processes: one owner per XCP machine-wide.
  ::mkdir(state_dir.c_str(), 0700);  // normally there already (the fake tree lives in it)
  const std::string path = state_dir + "/spm-node" + std::to_string(node_) + ".lock";
  UniqueFd fd(real::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  if (!fd) return -errno;
  if (flock(fd.get(), LOCK_EX | LOCK_NB) != 0) return errno == EWOULDBLOCK ? -EBUSY : -errno;
  lock_fd_ = std::move(fd);
  owner_ = file_id;
  streams_.assign(xccs_, Stream{});
  running_ = false;
  return 0;
}

void SpmUnit::release_locked() {
  running_ = false;
  streams_.clear();
  owner_ = 0;
  lock_fd_.reset();  // closing the only handle drops the flock
}

int SpmUnit::release(uint64_t file_id) {
  std::unique_lock lk(mu_);
  if (!owner_ || owner_ != file_id) return -EINVAL;
  cv_.wait(lk, [&] { return busy_ == 0; });
  if (owner_ != file_id) return -EINVAL;
  release_locked();
  return 0;
}

void SpmUnit::release_if_owner(uint64_t file_id) {
  std::unique_lock lk(mu_);
  if (owner_ != file_id) return;
  cv_.wait(lk, [&] { return busy_ == 0; });
  if (owner_ == file_id) release_locked();
}

void SpmUnit::forget_after_fork() {
  // The child's copy of the lock handle shares the parent's lock; closing it releases nothing.
  owner_ = 0;
  busy_ = 0;
  running_ = false;
  streams_.clear();
  lock_fd_.reset();
}

uint64_t SpmUnit::ring_capacity_lines() const {
  return std::max<uint64_t>(1, knobs().spm_ring_bytes.load() / kSpmLineBytes);
}

double SpmUnit::ticks_per_sample() const {
  return 1e8 / static_cast<double>(rate_hz_);  // 100 MHz GPU clock
}

void SpmUnit::deliver_locked(Stream &s, uint32_t xcc, uint64_t first, uint64_t count) {
  uint8_t buf[256 * kSpmLineBytes];
  const double tps = ticks_per_sample();
  while (count > 0) {
    const uint64_t n = std::min<uint64_t>(count, sizeof(buf) / kSpmLineBytes);
    for (uint64_t i = 0; i < n; ++i)
      synthesize_spm_line(layout_, xcc, first + i, start_ticks_, tps, buf + i * kSpmLineBytes);
    const uint64_t bytes = n * kSpmLineBytes;
    // A destination the caller unmapped loses the data, as the kernel's copy_to_user would.
    if (copy_to_user(s.slice_addr + sizeof(rvgl_drm_amdgpu_spm_buffer_header) + s.copied, buf,
                     bytes) != 0)
      s.loss = true;
    s.copied += bytes;
    counters().spm_bytes.fetch_add(bytes, std::memory_order_relaxed);
    first += n;
    count -= n;
  }
}

void SpmUnit::drain_ring_locked(Stream &s, uint32_t xcc) {
  while (s.has_slice && !s.ring.empty() && s.copied < s.data_cap) {
    auto &[first, count] = s.ring.front();
    const uint64_t take = std::min(count, (s.data_cap - s.copied) / kSpmLineBytes);
    if (take == 0) break;
    deliver_locked(s, xcc, first, take);
    first += take;
    count -= take;
    s.ring_lines -= take;
    if (count == 0) s.ring.pop_front();
  }
}

void SpmUnit::update_locked(uint64_t now_ns) {
  if (!running_ || now_ns <= start_ns_) return;
  const uint64_t lps = layout_.lines_per_sample();
  const uint64_t samples = static_cast<uint64_t>(static_cast<double>(now_ns - start_ns_) * 1e-9 *
                                                 static_cast<double>(rate_hz_));
  const uint64_t total = samples * lps;
  if (total <= lines_emitted_) return;
  const uint64_t cap = ring_capacity_lines();
  for (uint32_t x = 0; x < streams_.size(); ++x) {
    Stream &s = streams_[x];
    drain_ring_locked(s, x);
    uint64_t first = lines_emitted_, count = total - lines_emitted_;
    if (s.has_slice && s.ring.empty()) {
      const uint64_t take = std::min(count, (s.data_cap - s.copied) / kSpmLineBytes);
      if (take) deliver_locked(s, x, first, take);
      first += take;
      count -= take;
    }
    const uint64_t put = std::min(count, cap - std::min(cap, s.ring_lines));
    if (put) {
      if (!s.ring.empty() && s.ring.back().first + s.ring.back().second == first)
        s.ring.back().second += put;
      else
        s.ring.emplace_back(first, put);
      s.ring_lines += put;
      count -= put;
    }
    // The ring overflowed: samples are lost, and the buffer in place says so (KFD sets
    // has_data_loss on the current destination when the RLC stalls).
    if (count > 0 && s.has_slice) s.loss = true;
  }
  lines_emitted_ = total;
}

bool SpmUnit::any_full_locked() const {
  for (const auto &s : streams_)
    if (s.has_slice && s.copied + kSpmLineBytes > s.data_cap) return true;
  return false;
}

uint64_t SpmUnit::next_full_ns_locked() const {
  uint64_t best = UINT64_MAX;
  const uint64_t lps = layout_.lines_per_sample();
  for (const auto &s : streams_) {
    if (!s.has_slice) continue;
    const uint64_t space = (s.data_cap - s.copied) / kSpmLineBytes;
    const uint64_t fresh = space > s.ring_lines ? space - s.ring_lines : 0;
    const uint64_t samples = (lines_emitted_ + fresh + lps - 1) / lps;
    const double t = static_cast<double>(samples) * 1e9 / static_cast<double>(rate_hz_);
    best = std::min(best, start_ns_ + static_cast<uint64_t>(t) + 1);
  }
  return best;
}

int SpmUnit::set_dest(uint64_t file_id, rvgl_drm_amdgpu_spm_args &args) {
  for (uint32_t r : args.reserved)
    if (r) return -EINVAL;
  uint64_t slice = 0;
  if (args.dest_buf) {
    slice = (args.buf_size / xccs_) & ~uint64_t{kSpmLineBytes - 1};
    // Whether the new buffer is mapped is not checked: the kernel's copies into it fail later
    // (samples lost, and the header when it is retired).
    if (slice <= sizeof(rvgl_drm_amdgpu_spm_buffer_header)) return -EINVAL;
  }
  std::unique_lock lk(mu_);
  if (!owner_ || owner_ != file_id) return -EINVAL;
  ++busy_;
  uint64_t now = monotonic_ns();
  update_locked(now);

  uint32_t timeout_left = args.timeout;
  bool have_slice = false;
  for (const auto &s : streams_)
    have_slice |= s.has_slice;
  if (args.timeout && have_slice && !any_full_locked()) {
    const uint64_t deadline = now + uint64_t{args.timeout} * 1000000ull;
    while (true) {
      const uint64_t wake = std::min(deadline, next_full_ns_locked());
      cv_.wait_for(lk, std::chrono::nanoseconds(wake > now ? wake - now : 0));
      now = monotonic_ns();
      update_locked(now);
      if (any_full_locked() || now >= deadline) break;
    }
    timeout_left = now >= deadline ? 0 : static_cast<uint32_t>((deadline - now) / 1000000ull);
  }

  // XCC by XCC, as amdgpu_set_dest_buffer() does: spm_update_dest_info() writes the header of
  // the slice it retires and only then takes the new one; a header it cannot write ends the loop
  // with -EFAULT, the XCCs before already on the new buffer and the rest still on the old.
  int ret = 0;
  uint32_t moved = 0;
  args.bytes_copied = 0;
  args.has_data_loss = 0;
  for (; moved < streams_.size(); ++moved) {
    Stream &s = streams_[moved];
    if (s.has_slice) {
      rvgl_drm_amdgpu_spm_buffer_header h{};
      h.version = kSpmVersion;
      h.bytes_copied = static_cast<uint32_t>(s.copied);
      h.has_data_loss = s.loss ? 1 : 0;
      if (copy_to_user(s.slice_addr, &h, sizeof(h)) != 0) {
        ret = -EFAULT;
        break;
      }
      args.bytes_copied += static_cast<uint32_t>(s.copied);
      args.has_data_loss += s.loss ? 1 : 0;
      s.has_slice = false;
    }
    if (args.dest_buf) {
      s.has_slice = true;
      s.slice_addr = args.dest_buf + moved * slice;
      s.data_cap = slice - sizeof(rvgl_drm_amdgpu_spm_buffer_header);
      s.copied = 0;
      s.loss = false;
    }
  }
  if (args.dest_buf) {
    if (!running_) {
      // Starting the SPM resets its ring (amdgpu_amdkfd_rlc_spm_cntl in KFD's implementation).
      // Nothing was retired, so every XCC moved.
      running_ = true;
      rate_hz_ = std::max<uint64_t>(1, knobs().spm_rate_hz.load());
      start_ns_ = now;
      start_ticks_ = now / 10;
      lines_emitted_ = 0;
      for (auto &s : streams_)
        s.ring.clear(), s.ring_lines = 0;
    } else {
      for (uint32_t x = 0; x < moved; ++x)
        drain_ring_locked(streams_[x], x);
    }
  } else if (ret == 0) {
    running_ = false;
    for (auto &s : streams_)
      s.ring.clear(), s.ring_lines = 0;
  }
  args.timeout = timeout_left;
  --busy_;
  cv_.notify_all();
  return ret;
}

}  // namespace rvgl::emu
