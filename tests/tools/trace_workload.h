// A context workload that sends every v1 command (1..13) at least once, plus an unknown command
// and a malformed frame, with capture mode on; it remembers what the guest sent and what the
// harness read back, so the tests can hold the decoded capture against it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "rocm_virgl_protocol.h"

namespace rvgl::tools_test {

// One synchronous request and the response the guest side saw.
struct SentRequest {
  uint32_t cmd;
  uint32_t seqno;
  int32_t result;
};

struct CapturedWorkload {
  std::string dir;                // the capture directory (removed by the destructor)
  std::string path;               // the context's capture file
  std::vector<SentRequest> sent;  // in order, every request that got a response
  uint32_t submits = 0;           // submit_cmd calls, each one DONE record
  int malformed_result = 0;       // submit_cmd's result for the malformed buffer

  // Values the decoded fields must show.
  uint64_t bo_size = 0;
  uint32_t bo = 0;
  uint64_t ib_va = 0;
  uint32_t ib_bytes = 0;
  uint32_t queue_a = 0, queue_b = 0;
  uint64_t seq_a = 0, seq_b = 0;
  uint64_t vram_total = 0;   // QUERY_INFO(MEMORY)
  uint64_t max_objects = 0;  // QUERY_INFO(USAGE)
  uint64_t spm_dest_size = 0;
  rvgl_rsp_queue_state state{};

  CapturedWorkload() = default;
  CapturedWorkload(const CapturedWorkload &) = delete;
  CapturedWorkload &operator=(const CapturedWorkload &) = delete;
  ~CapturedWorkload();
};

// Runs the workload on a context on the emulated GPU with RVGL_CAPTURE_DIR pointing at a fresh
// temporary directory. Throws std::runtime_error when the context cannot run it.
std::unique_ptr<CapturedWorkload> run_captured_workload();

constexpr uint32_t kUnknownCommand = 99;

}  // namespace rvgl::tools_test
