// One ROCM context as a guest drives it through the public virglrenderer API (the calls a VMM
// relays): blobs, the mapped shared page, requests by virgl_renderer_submit_cmd, fences by
// virgl_renderer_context_create_fence. Requests are encoded into one reused buffer, so the hot
// loop of a benchmark allocates nothing (a guest driver's encoder would not either).
#pragma once

#include <sys/uio.h>

#include <cstdint>
#include <cstring>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "rocm_virgl_protocol.h"
#include "virgl_api.h"

namespace rvgl::bench {

struct ApiBuffer {
  uint32_t bo = 0;  // 0 for userptr blobs
  uint32_t res = 0;
  uint64_t va = 0;
  uint64_t size = 0;
  uint8_t *cpu = nullptr;  // the VMM's mapping (resource_map), when mappable
};

class ApiGuest {
 public:
  // Resource ids are taken from [first_res, ...): guests in one process must not collide.
  ApiGuest(uint32_t ctx_id, uint32_t first_res) : ctx_(ctx_id), next_res_(first_res) {}
  ~ApiGuest();
  ApiGuest(const ApiGuest &) = delete;
  ApiGuest &operator=(const ApiGuest &) = delete;

  // capset, context, shared page. Throws on failure (so do the helpers below).
  void start();
  uint32_t ctx_id() const { return ctx_; }
  const rvgl_capset &caps() const { return caps_; }

  // A BO of `domain` claimed as a mappable HOST3D blob, mapped by the VMM, bound at the next VA.
  ApiBuffer mapped_bo(uint64_t size, uint32_t domain, uint32_t bo_flags = 0,
                      uint32_t va_flags = RVGL_VA_FLAG_READ | RVGL_VA_FLAG_WRITE |
                                          RVGL_VA_FLAG_EXECUTE);
  // A BO without a blob (never CPU-visible), bound at the next VA.
  ApiBuffer gpu_bo(uint64_t size, uint32_t domain);
  // A GUEST+USERPTR blob over `iov`; returns the resource id (or throws with the renderer's code).
  uint32_t userptr_blob(std::span<const iovec> iov, uint64_t size);
  void va_map(ApiBuffer &b, uint32_t flags);
  void unref(uint32_t res);

  uint32_t queue_create(uint32_t ip, uint32_t ring_idx);
  // SUBMIT of one IB; the response (written during submit_cmd) is checked. Returns its seq.
  uint64_t submit(uint32_t queue, uint64_t ib_va, uint32_t dwords);
  void fence(uint32_t ring_idx, uint64_t fence_id);

  // Sends `bytes` (framed requests) as one command buffer; returns submit_cmd's result.
  int submit_raw(std::span<const uint8_t> bytes);
  // Next seqno and response slot for hand-built request batches.
  uint32_t next_seqno() { return ++seqno_; }
  const uint8_t *response(uint32_t rsp_off) const {
    return shmem_ + RVGL_RSP_AREA_OFFSET + rsp_off;
  }

 private:
  template <class Rsp, class Req>
  Rsp call(uint32_t cmd, Req req, std::span<const uint8_t> tail = {});
  int create_blob(uint32_t res, uint32_t mem, uint32_t flags, uint64_t blob_id, uint64_t size,
                  const iovec *iov = nullptr, uint32_t num_iovs = 0);
  uint64_t alloc_va(uint64_t size);

  uint32_t ctx_;
  uint32_t next_res_;
  bool created_ = false;
  rvgl_capset caps_{};
  uint32_t shmem_res_ = 0;
  uint8_t *shmem_ = nullptr;
  std::vector<uint32_t> resources_;  // unref'ed when the guest goes
  uint32_t seqno_ = 0;
  uint32_t slot_ = 0;
  uint64_t next_blob_ = 0;
  uint64_t next_va_ = 0;
  std::vector<uint32_t> buf_;  // the encoded command buffer, in dwords as submit_cmd takes it
};

}  // namespace rvgl::bench
