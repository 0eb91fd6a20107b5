// Writes a context's capture file (RVGL_CAPTURE_DIR). Off by default; when on, every command
// buffer is written before it is processed, so a buffer that crashes the host is still on disk.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <span>
#include <string>

namespace rvgl {

class CaptureWriter {
 public:
  // nullptr when the file cannot be created (capture is then silently off).
  static std::unique_ptr<CaptureWriter> open(const std::string &dir, uint32_t ctx_id,
                                             uint32_t capset_id);
  ~CaptureWriter();

  void submit(std::span<const uint8_t> cmds);
  void response(uint32_t cmd, uint32_t seqno, std::span<const uint8_t> rsp);
  void done(int result);
  const std::string &path() const { return path_; }

 private:
  void record(uint32_t type, uint32_t cmd, uint32_t seqno, int32_t result,
              std::span<const uint8_t> payload);
  FILE *f_ = nullptr;
  std::string path_;
};

}  // namespace rvgl
