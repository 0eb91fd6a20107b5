// Per-context quota accounting (DESIGN.md D8). Objects are charged when created and released when
// the last reference to them dies, so no sequence of guest commands can outgrow the limits.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

namespace rvgl {

struct UsageSnapshot {
  uint64_t objects = 0;
  uint64_t vram_bytes = 0;
  uint64_t gtt_bytes = 0;
  uint64_t userptr_bytes = 0;
};

class Usage {
 public:
  // kDoorbell: the device's doorbell aperture, which every process of the host shares.
  // kOther: objects whose bytes count nowhere (imports: another owner holds them).
  enum class Pool { kVram, kGtt, kUserptr, kDoorbell, kOther };

  // max_process_doorbell: the doorbell bytes of every account of the process together.
  Usage(uint64_t max_objects, uint64_t max_vram, uint64_t max_gtt, uint64_t max_userptr,
        uint64_t max_doorbell, uint64_t max_process_doorbell = UINT64_MAX)
      : max_objects_(max_objects),
        max_{max_vram, max_gtt, max_userptr, max_doorbell, UINT64_MAX},
        max_process_doorbell_(max_process_doorbell) {
    alive_.fetch_add(1, std::memory_order_relaxed);
  }
  ~Usage() { alive_.fetch_sub(1, std::memory_order_relaxed); }
  Usage(const Usage &) = delete;
  Usage &operator=(const Usage &) = delete;
  // Accounts of this process still alive: one per context, and one per destroyed context whose
  // exported memory a VMM resource still holds (the charges keep the account). What
  // RVGL_MAX_CONTEXTS bounds, so host memory stays within contexts x quota.
  static uint64_t alive() { return alive_.load(std::memory_order_relaxed); }
  // Doorbell bytes charged in this process, all accounts together.
  static uint64_t process_doorbell_bytes() {
    return process_doorbell_.load(std::memory_order_relaxed);
  }

  // `objects` kernel objects holding `bytes` in `pool`: 0, or -ENOSPC with nothing charged.
  int charge(Pool pool, uint64_t bytes, uint64_t objects = 1);
  void release(Pool pool, uint64_t bytes, uint64_t objects = 1);
  // Kernel objects still allowed (0 when full).
  uint64_t objects_left() const;
  UsageSnapshot snapshot() const;

 private:
  static inline std::atomic<uint64_t> alive_{0};
  // The doorbell aperture is the device's, shared with every process of the host: the contexts
  // of one VMM process must not take all of it between them, whatever each one's quota.
  static inline std::atomic<uint64_t> process_doorbell_{0};
  const uint64_t max_objects_;
  const uint64_t max_[5];
  const uint64_t max_process_doorbell_;
  std::atomic<uint64_t> objects_{0};
  std::atomic<uint64_t> bytes_[5]{};
};

// A charge returned when its owner (a MemoryObject) dies, or when it is revoked.
class Charge {
 public:
  Charge() = default;
  Charge(std::shared_ptr<Usage> u, Usage::Pool pool, uint64_t bytes, uint64_t objects = 1)
      : usage_(std::move(u)), pool_(pool), bytes_(bytes), objects_(objects) {}
  ~Charge() { reset(); }
  Charge(Charge &&o) noexcept = default;
  Charge &operator=(Charge &&o) noexcept {
    if (this != &o) {
      reset();
      usage_ = std::move(o.usage_);
      pool_ = o.pool_;
      bytes_ = o.bytes_;
      objects_ = o.objects_;
    }
    return *this;
  }
  // n more objects, already charged to the same Usage, returned with this charge.
  void add_objects(uint64_t n) { objects_ += n; }
  void reset() {
    if (usage_) usage_->release(pool_, bytes_, objects_);
    usage_.reset();
  }

 private:
  std::shared_ptr<Usage> usage_;
  Usage::Pool pool_ = Usage::Pool::kOther;
  uint64_t bytes_ = 0;
  uint64_t objects_ = 1;
};

}  // namespace rvgl
