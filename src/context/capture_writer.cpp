#include "context/capture_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "context/capture_format.h"
#include "util/monotonic_clock.h"

namespace rvgl {

namespace {

uint64_t now_ns() {
  return static_cast<uint64_t>(monotonic_ns());
}

}  // namespace

std::shared_ptr<CaptureBudget> CaptureBudget::process(uint64_t limit) {
  static const std::shared_ptr<CaptureBudget> budget = std::make_shared<CaptureBudget>(limit);
  return budget;
}

bool CaptureBudget::take(uint64_t n) {
  uint64_t used = used_.load(std::memory_order_relaxed);
  do {
    if (n > limit_ || used > limit_ - n) return false;
  } while (!used_.compare_exchange_weak(used, used + n, std::memory_order_relaxed));
  return true;
}

std::unique_ptr<CaptureWriter> CaptureWriter::open(const std::string &dir, uint32_t ctx_id,
                                                   uint32_t capset_id,
                                                   std::shared_ptr<CaptureBudget> budget) {
  // A file costs the disk a block and an inode however little it holds: charged that much, so
  // contexts created and destroyed in a loop cannot make files without bound while the bytes
  // written stay small. The header and a last FULL record fit in it.
  if (!budget || !budget->take(kFileCharge)) return nullptr;
  std::unique_ptr<CaptureWriter> w(new CaptureWriter());
  w->budget_ = std::move(budget);
  // Guests' kernels hand out context ids lowest-free, so a VMM reuses an id as soon as a guest
  // process ends: a later context gets a file of its own rather than truncate the earlier one's
  // (nor one a crashed process of the same pid left). Its name adds a number no file of this
  // process has had, so finding a free name costs one try, not one per earlier use of the id.
  const std::string base =
      dir + "/rvgl-capture-" + std::to_string(getpid()) + "-ctx" + std::to_string(ctx_id);
  std::string path = base + ".bin";
  int fd = -1;
  for (int tries = 0; tries < kNameTries; ++tries) {
    // Guest data: only the VMM's user reads it.
    fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd >= 0 || errno != EEXIST) break;
    path = base + "-" + std::to_string(w->budget_->next_serial()) + ".bin";
  }
  if (fd < 0) return nullptr;
  w->f_ = ::fdopen(fd, "wb");
  if (!w->f_) {
    ::close(fd);
    ::unlink(path.c_str());
    return nullptr;
  }
  w->path_ = std::move(path);
  capture::FileHeader h{};
  std::memcpy(h.magic, capture::kFileMagic, sizeof(h.magic));
  h.version = capture::kVersion;
  h.ctx_id = ctx_id;
  h.capset_id = capset_id;
  std::fwrite(&h, sizeof(h), 1, w->f_);
  return w;
}

CaptureWriter::~CaptureWriter() {
  if (f_) std::fclose(f_);
}

void CaptureWriter::write_record(uint32_t type, uint32_t cmd, uint32_t seqno, int32_t result,
                                 std::span<const uint8_t> payload) {
  capture::RecordHeader r{type,    static_cast<uint32_t>(payload.size()), cmd, seqno, result, 0,
                          now_ns()};
  std::fwrite(&r, sizeof(r), 1, f_);
  if (!payload.empty()) std::fwrite(payload.data(), 1, payload.size(), f_);
  static const uint8_t zeros[8] = {};
  if (const size_t pad = (8 - payload.size() % 8) % 8) std::fwrite(zeros, 1, pad, f_);
}

void CaptureWriter::record(uint32_t type, uint32_t cmd, uint32_t seqno, int32_t result,
                           std::span<const uint8_t> payload) {
  if (!f_) return;
  const uint64_t bytes = sizeof(capture::RecordHeader) + (payload.size() + 7) / 8 * 8;
  if (budget_->take(bytes)) return write_record(type, cmd, seqno, result, payload);
  write_record(capture::kFull, 0, 0, 0, {});
  std::fclose(f_);
  f_ = nullptr;
}

void CaptureWriter::submit(std::span<const uint8_t> cmds) {
  record(capture::kSubmit, 0, 0, 0, cmds);
  if (f_) std::fflush(f_);  // on disk before the host touches it
}

void CaptureWriter::response(uint32_t cmd, uint32_t seqno, std::span<const uint8_t> rsp) {
  int32_t result = 0;
  if (rsp.size() >= sizeof(result)) std::memcpy(&result, rsp.data(), sizeof(result));
  record(capture::kResponse, cmd, seqno, result, rsp);
}

void CaptureWriter::done(int result) {
  record(capture::kDone, 0, 0, result, {});
  if (f_) std::fflush(f_);
}

}  // namespace rvgl
