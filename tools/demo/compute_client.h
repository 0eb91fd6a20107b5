// A small compute client over the guest library's vtest transport and Session: what the demo
// and the end-to-end tests do with a ROCM context — buffers as blobs the guest maps, GPU VA,
// kernel queues, IBs and fences on their rings — in a few calls each.
//
// Not thread-safe (one Session). Every call returns a Status/Result, never throws.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "rocm_virgl_protocol.h"
#include "rvgl_session.h"
#include "rvgl_vtest_transport.h"

namespace rvgl::demo {

using guest::Error;
using guest::Result;
using guest::Status;

// Memory the GPU sees at `va` and the guest sees at memory(): a BO claimed as a HOST3D blob and
// mapped from the fd vtest returned, or a GUEST userptr blob (its memory is vtest's memfd).
struct GpuBuffer {
  uint32_t bo = 0;  // 0 for userptr blobs (named by resource id)
  guest::Blob blob;
  uint64_t va = 0;  // 0 until map_gpu
  uint64_t size = 0;

  std::span<uint8_t> memory() const { return blob.memory; }
  template <class T>
  T *as() const {
    return reinterpret_cast<T *>(blob.memory.data());
  }
};

struct ClientOptions {
  std::string client_name = "rocm-virgl-demo";
  std::chrono::milliseconds timeout{10000};
  // The server may still be between bind() and listen(): retry a refused connect this long.
  std::chrono::milliseconds connect_retry{3000};
};

class ComputeClient {
 public:
  // Connects, reads and checks the capset, creates the context and its shared page.
  static Result<std::unique_ptr<ComputeClient>> connect(const std::string &socket_path,
                                                        const ClientOptions &options = {});

  const rvgl_capset &capset() const { return session_->capset(); }
  guest::Session &session() { return *session_; }
  guest::VtestTransport &transport() { return *transport_; }

  // A BO of `domain` created under a fresh blob_id, claimed as a HOST3D blob and mapped.
  Result<GpuBuffer> create_buffer(uint64_t size, uint32_t domain, uint32_t bo_flags = 0);
  // A GUEST blob with the USERPTR flag holding a copy of `init` (vtest cannot share the client's
  // own pages, so its memfd becomes the guest memory the GPU reads without a host copy).
  Result<GpuBuffer> create_userptr(uint64_t size, std::span<const uint8_t> init = {},
                                   bool read_only = false);
  // Maps the whole buffer at the next free GPU VA.
  Status map_gpu(GpuBuffer &buf, uint32_t va_flags = RVGL_VA_FLAG_READ | RVGL_VA_FLAG_WRITE);
  Status release(GpuBuffer &&buf);

  Result<uint32_t> create_queue(uint32_t ip, uint32_t ring_idx);
  // One IB of `ib` dwords, copied into `ib_buf` at `offset`; returns the submission's seq.
  Result<uint64_t> submit(uint32_t queue, GpuBuffer &ib_buf, uint64_t offset,
                          const std::vector<uint32_t> &ib, std::span<const rvgl_wait> waits = {});
  // A fence on `ring_idx`: it signals when the work submitted on that ring so far is done.
  Result<guest::Fence> fence(uint32_t ring_idx);
  Result<bool> wait(const guest::Fence &f, std::chrono::milliseconds timeout);

 private:
  ComputeClient(guest::VtestTransport *t, std::unique_ptr<guest::Session> s)
      : transport_(t), session_(std::move(s)) {}

  guest::VtestTransport *transport_;  // owned by the session
  std::unique_ptr<guest::Session> session_;
  uint64_t next_blob_id_ = 0;
  uint64_t next_va_ = 0;
};

}  // namespace rvgl::demo
