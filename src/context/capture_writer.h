// Writes a context's capture file (RVGL_CAPTURE_DIR). Off by default; when on, every command
// buffer is written before it is processed, so a buffer that crashes the host is still on disk,
// until the process's capture budget is spent.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <span>
#include <string>

namespace rvgl {

// The bytes capture files may take together (RVGL_CAPTURE_MAX_MB), shared by every context of a
// process: a guest that sends much, or makes context after context (a file each), cannot fill
// the host's disk.
class CaptureBudget {
 public:
  explicit CaptureBudget(uint64_t limit) : limit_(limit) {}
  // The process's budget, made with `limit` on first use.
  static std::shared_ptr<CaptureBudget> process(uint64_t limit);
  // Takes n bytes if they fit.
  bool take(uint64_t n);
  uint64_t used() const { return used_.load(std::memory_order_relaxed); }
  // A number for a capture file's name that no earlier call in this process returned.
  uint64_t next_serial() { return serial_.fetch_add(1, std::memory_order_relaxed) + 2; }

 private:
  const uint64_t limit_;
  std::atomic<uint64_t> used_{0};
  std::atomic<uint64_t> serial_{0};
};

class CaptureWriter {
 public:
  // nullptr when the file cannot be created, or the budget has no room for its header (capture
  // is then off for this context).
  // DIR/rvgl-capture-<pid>-ctx<ctx_id>.bin, or, when that exists (the id was used before),
  // DIR/rvgl-capture-<pid>-ctx<ctx_id>-<n>.bin; never an existing file.
  // What a file takes from the budget when it is made, whatever it holds.
  static constexpr uint64_t kFileCharge = 4096;
  static std::unique_ptr<CaptureWriter> open(const std::string &dir, uint32_t ctx_id,
                                             uint32_t capset_id,
                                             std::shared_ptr<CaptureBudget> budget);
  ~CaptureWriter();

  void submit(std::span<const uint8_t> cmds);
  void response(uint32_t cmd, uint32_t seqno, std::span<const uint8_t> rsp);
  void done(int result);
  const std::string &path() const { return path_; }

 private:
  // Writes one record if the budget takes it; otherwise ends the file with a FULL record (the
  // one write the budget does not count: one per file, and every file took its header from the
  // budget first) and closes it.
  void record(uint32_t type, uint32_t cmd, uint32_t seqno, int32_t result,
              std::span<const uint8_t> payload);
  void write_record(uint32_t type, uint32_t cmd, uint32_t seqno, int32_t result,
                    std::span<const uint8_t> payload);
  // Names tried before the context goes without a file: only files left by another process of
  // the same pid (or made meanwhile by someone else) can be in the way of a fresh number.
  static constexpr int kNameTries = 8;
  FILE *f_ = nullptr;
  std::string path_;
  std::shared_ptr<CaptureBudget> budget_;
};

}  // namespace rvgl
