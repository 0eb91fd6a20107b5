// Harness 1, protocol: the input is one command buffer (several framed requests) fed to a live
// context that already has a shared page, objects, VA mappings, queues, a userptr blob and the
// SPM. Byte 0 is a mode: bit 0 rewrites the frames' seqnos to be in order (so most inputs get past
// the seqno check and reach the handlers); bit 1 adds a fence on ring (byte 0 >> 2).
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "support/context_harness.h"

namespace {

using rvgl::test::ContextHarness;

struct Target {
  rvgl::Config cfg;
  std::unique_ptr<ContextHarness> h;
  std::vector<ContextHarness::HostBuffer> bufs;
  rvgl::UniqueFd ram_fd;
  rvgl::Mapping ram;
  uint32_t seqno = 0;
  uint64_t runs = 0;

  Target() {
    cfg = rvgl::test::test_config();
    // Small quotas keep a long run's memory bounded whatever the inputs allocate.
    cfg.limits.max_objects = 64;
    cfg.limits.max_vram_bytes = 64ull << 20;
    cfg.limits.max_gtt_bytes = 64ull << 20;
    cfg.limits.max_userptr_bytes = 16ull << 20;
    ram_fd.reset(memfd_create("fuzz-guest-ram", MFD_CLOEXEC));
    if (ftruncate(ram_fd.get(), 1 << 20)) abort();
    ram = rvgl::Mapping::map_shared(ram_fd.get(), 1 << 20, PROT_READ | PROT_WRITE);
    reset();
  }

  // A fresh context in a known state (the previous one, whatever the inputs did to it, goes).
  void reset() {
    bufs.clear();
    h.reset();
    h = std::make_unique<ContextHarness>(cfg, false, 1);
    seqno = 0;
    h->create_shmem();
    const uint64_t va = h->capset().va_start;
    bufs.push_back(h->mapped_bo(64 * 1024));  // bo 1, res 2
    bufs.push_back(h->mapped_bo(64 * 1024, RVGL_DOMAIN_VRAM, RVGL_BO_FLAG_CPU_ACCESS));  // bo 2
    h->va_map(1, 0, 0, va, 64 * 1024);
    h->va_map(2, 0, 0, va + (1 << 20), 64 * 1024);
    h->queue_create(RVGL_IP_COMPUTE, 1);
    h->queue_create(RVGL_IP_SDMA, 2);
    rvgl::BlobArgs a;
    a.res_id = 10;
    a.blob_mem = RVGL_BLOB_MEM_GUEST;
    a.blob_flags = RVGL_BLOB_FLAG_USERPTR;
    a.size = 64 * 1024;
    const iovec iov{ram.get(), 64 * 1024};
    a.iov = {&iov, 1};
    rvgl::BlobExport e;
    h->ctx().create_blob(a, &e);
    rvgl_req_spm_acquire acq{};
    acq.ring_idx = 3;
    h->call<rvgl_rsp_spm_acquire>(RVGL_CMD_SPM_ACQUIRE, acq);
    seqno = h->next_seqno();
  }
};

Target *target;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  setenv("RVGL_EMU_SPM_RATE_HZ", "100000", 0);
  target = new Target();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  Target &t = *target;
  if (++t.runs % 512 == 0) t.reset();  // lost queues and full quotas would hide the handlers
  const uint8_t mode = data[0];
  std::vector<uint8_t> buf(data + 1, data + size);
  if (mode & 1) {
    for (size_t pos = 0; pos + sizeof(rvgl_req_hdr) <= buf.size();) {
      rvgl_req_hdr h;
      std::memcpy(&h, buf.data() + pos, sizeof(h));
      if (h.len < sizeof(h) || h.len > buf.size() - pos || h.len % 8) break;
      h.seqno = t.seqno = t.h->next_seqno();
      std::memcpy(buf.data() + pos, &h, sizeof(h));
      pos += h.len;
    }
  }
  t.h->ctx().submit_cmd(buf);
  if (mode & 2) {
    t.h->ctx().create_fence(mode >> 2, t.runs);
    t.h->ctx().poll();
  }
  return 0;
}
