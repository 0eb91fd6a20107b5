#include "trace_workload.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <stdexcept>

#include "support/context_harness.h"

namespace rvgl::tools_test {

namespace {

namespace fs = std::filesystem;
using test::ContextHarness;

constexpr uint32_t kRingA = 1;
constexpr uint32_t kRingB = 2;
constexpr uint32_t kSpmRing = 3;

// Mirrors the harness's seqno counter (one per call or next_seqno) to know each request's seqno.
class Recorder {
 public:
  Recorder(ContextHarness &h, CapturedWorkload &w) : h_(h), w_(w) {}

  template <class Rsp, class Req>
  Rsp call(uint32_t cmd, const Req &req, std::span<const uint8_t> tail = {}) {
    const uint32_t seqno = ++seqno_;
    Rsp rsp = h_.template call<Rsp>(cmd, req, tail);
    ++w_.submits;
    w_.sent.push_back({cmd, seqno, rsp.hdr.result});
    return rsp;
  }
  // A buffer handed to the context as is; `answered` when it holds one framed request whose
  // response the host writes.
  int raw(std::vector<uint8_t> bytes, uint32_t cmd, bool answered) {
    const uint32_t seqno = ++seqno_;
    h_.next_seqno();
    auto *hdr = reinterpret_cast<rvgl_req_hdr *>(bytes.data());
    hdr->seqno = seqno;
    const int r = h_.ctx().submit_cmd(bytes);
    ++w_.submits;
    if (answered) {
      rvgl_rsp_hdr rsp;
      std::memcpy(&rsp, h_.shmem() + RVGL_RSP_AREA_OFFSET + hdr->rsp_off, sizeof(rsp));
      w_.sent.push_back({cmd, seqno, rsp.result});
    }
    return r;
  }

 private:
  ContextHarness &h_;
  CapturedWorkload &w_;
  uint32_t seqno_ = 0;
};

void workload(ContextHarness &h, CapturedWorkload &w) {
  h.create_shmem();
  Recorder r(h, w);

  r.call<rvgl_rsp_nop>(RVGL_CMD_NOP, rvgl_req_nop{});
  rvgl_req_query_info q{};
  q.query = RVGL_INFO_MEMORY;
  w.vram_total = r.call<rvgl_rsp_query_info>(RVGL_CMD_QUERY_INFO, q).data.memory.vram_total;
  q.query = RVGL_INFO_USAGE;
  w.max_objects = r.call<rvgl_rsp_query_info>(RVGL_CMD_QUERY_INFO, q).data.usage.max_objects;
  q.query = RVGL_INFO_TIMESTAMP;
  r.call<rvgl_rsp_query_info>(RVGL_CMD_QUERY_INFO, q);

  // An IB buffer: created, claimed as a blob (not a command: no seqno) and mapped for the GPU.
  w.bo_size = 8192;
  rvgl_req_bo_create bc{};
  bc.size = w.bo_size;
  bc.domain = RVGL_DOMAIN_GTT;
  bc.blob_id = 1;
  w.bo = r.call<rvgl_rsp_bo_create>(RVGL_CMD_BO_CREATE, bc).bo;
  BlobArgs a;
  a.res_id = h.next_res_id();
  a.blob_mem = RVGL_BLOB_MEM_HOST3D;
  a.blob_flags = RVGL_BLOB_FLAG_USE_MAPPABLE;
  a.blob_id = 1;
  a.size = w.bo_size;
  BlobExport e;
  if (h.ctx().create_blob(a, &e)) throw std::runtime_error("blob claim failed");
  Mapping ib_map = Mapping::map_shared(e.fd.get(), w.bo_size, PROT_READ | PROT_WRITE);
  if (!ib_map.valid()) throw std::runtime_error("blob map failed");
  // Eight SDMA NOPs (opcode 0: a zero dword).
  w.ib_bytes = 32;
  std::memset(ib_map.as<uint8_t>(), 0, w.ib_bytes);

  const rvgl_capset &cap = h.capset();
  w.ib_va = (cap.va_start + 0x100000 + cap.va_alignment - 1) / cap.va_alignment * cap.va_alignment;
  rvgl_req_va_map vm{};
  vm.bo = w.bo;
  vm.va = w.ib_va;
  vm.size = w.bo_size;
  vm.flags = RVGL_VA_FLAG_READ | RVGL_VA_FLAG_EXECUTE;
  r.call<rvgl_rsp_va_map>(RVGL_CMD_VA_MAP, vm);

  rvgl_req_queue_create qc{};
  qc.kind = RVGL_QUEUE_KIND_KERNEL;
  qc.ip = RVGL_IP_SDMA;
  qc.ring_idx = kRingA;
  w.queue_a = r.call<rvgl_rsp_queue_create>(RVGL_CMD_QUEUE_CREATE, qc).queue;
  qc.ring_idx = kRingB;
  qc.priority = RVGL_PRIORITY_LOW;
  w.queue_b = r.call<rvgl_rsp_queue_create>(RVGL_CMD_QUEUE_CREATE, qc).queue;

  // SUBMIT on A, then on B after A's job: one IB each, B with a wait.
  rvgl_ib ib{w.ib_va, w.ib_bytes, 0};
  rvgl_req_submit s{};
  s.queue = w.queue_a;
  s.num_ibs = 1;
  w.seq_a =
      r.call<rvgl_rsp_submit>(RVGL_CMD_SUBMIT, s, {reinterpret_cast<uint8_t *>(&ib), sizeof(ib)})
          .seq;
  struct {
    rvgl_ib ib;
    rvgl_wait wait;
  } tail{ib, {w.queue_a, 0, w.seq_a}};
  s.queue = w.queue_b;
  s.num_waits = 1;
  w.seq_b = r.call<rvgl_rsp_submit>(RVGL_CMD_SUBMIT, s,
                                    {reinterpret_cast<uint8_t *>(&tail), sizeof(tail)})
                .seq;
  if (h.fence(kRingB, 1) || !h.wait_fence(kRingB, 1))
    throw std::runtime_error("the submitted IBs did not complete");
  rvgl_req_queue_state qs{};
  qs.queue = w.queue_b;
  w.state = r.call<rvgl_rsp_queue_state>(RVGL_CMD_QUEUE_STATE, qs);

  // SPM: SET_DEST before owning the SPM is refused at once (a successful one answers later,
  // outside the capture); then ACQUIRE and RELEASE.
  rvgl_req_spm_set_dest sd{};
  sd.bo = w.bo;
  w.spm_dest_size = 4096;
  sd.size = w.spm_dest_size;
  sd.timeout_ms = 5;
  r.call<rvgl_rsp_spm_set_dest>(RVGL_CMD_SPM_SET_DEST, sd);
  rvgl_req_spm_acquire sa{};
  sa.ring_idx = kSpmRing;
  r.call<rvgl_rsp_spm_acquire>(RVGL_CMD_SPM_ACQUIRE, sa);
  r.call<rvgl_rsp_spm_release>(RVGL_CMD_SPM_RELEASE, rvgl_req_spm_release{});

  rvgl_req_queue_destroy qd{};
  qd.queue = w.queue_b;
  r.call<rvgl_rsp_queue_destroy>(RVGL_CMD_QUEUE_DESTROY, qd);
  qd.queue = w.queue_a;
  r.call<rvgl_rsp_queue_destroy>(RVGL_CMD_QUEUE_DESTROY, qd);
  rvgl_req_va_unmap vu{};
  vu.va = w.ib_va;
  vu.size = w.bo_size;
  r.call<rvgl_rsp_va_unmap>(RVGL_CMD_VA_UNMAP, vu);
  rvgl_req_bo_free bf{};
  bf.bo = w.bo;
  r.call<rvgl_rsp_bo_free>(RVGL_CMD_BO_FREE, bf);

  // A command this host does not know (answered -ENOSYS), then a frame whose len is shorter
  // than its header (the whole submit fails).
  std::vector<uint8_t> unknown(sizeof(rvgl_req_hdr) + 8, 0);
  *reinterpret_cast<rvgl_req_hdr *>(unknown.data()) = {kUnknownCommand, 24, 0, 0};
  r.raw(unknown, kUnknownCommand, true);
  std::vector<uint8_t> bad(sizeof(rvgl_req_nop), 0);
  *reinterpret_cast<rvgl_req_hdr *>(bad.data()) = {RVGL_CMD_NOP, 12, 0, 0};
  w.malformed_result = r.raw(bad, RVGL_CMD_NOP, false);
}

}  // namespace

CapturedWorkload::~CapturedWorkload() {
  if (!dir.empty()) {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
}

std::unique_ptr<CapturedWorkload> run_captured_workload() {
  auto w = std::make_unique<CapturedWorkload>();
  std::string tmpl = (fs::temp_directory_path() / "rvgl-trace-test-XXXXXX").string();
  if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
  w->dir = tmpl;
  // The harness's configuration reads RVGL_CAPTURE_DIR, as the host library does.
  setenv("RVGL_CAPTURE_DIR", w->dir.c_str(), 1);
  Config cfg = test::test_config();
  unsetenv("RVGL_CAPTURE_DIR");
  {
    ContextHarness h(cfg);
    w->path = h.ctx().capture_path();
    workload(h, *w);
  }  // the context is gone: the file is complete
  if (w->path.empty()) throw std::runtime_error("capture mode did not start");
  return w;
}

}  // namespace rvgl::tools_test
