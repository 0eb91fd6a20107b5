#include "command_fields.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstring>

namespace rvgl::trace {

namespace {

constexpr Named kInfoQueries[] = {
    {RVGL_INFO_MEMORY, "MEMORY"}, {RVGL_INFO_USAGE, "USAGE"}, {RVGL_INFO_TIMESTAMP, "TIMESTAMP"}};
constexpr Named kDomains[] = {
    {RVGL_DOMAIN_VRAM, "VRAM"}, {RVGL_DOMAIN_GTT, "GTT"}, {RVGL_DOMAIN_DOORBELL, "DOORBELL"}};
constexpr Named kBoFlags[] = {{RVGL_BO_FLAG_CPU_ACCESS, "CPU_ACCESS"},
                              {RVGL_BO_FLAG_NO_CPU_ACCESS, "NO_CPU_ACCESS"},
                              {RVGL_BO_FLAG_WRITE_COMBINE, "WRITE_COMBINE"}};
constexpr Named kVaFlags[] = {
    {RVGL_VA_FLAG_READ, "READ"}, {RVGL_VA_FLAG_WRITE, "WRITE"}, {RVGL_VA_FLAG_EXECUTE, "EXECUTE"}};
constexpr Named kQueueKinds[] = {{RVGL_QUEUE_KIND_KERNEL, "KERNEL"},
                                 {RVGL_QUEUE_KIND_USER, "USER"}};
constexpr Named kIps[] = {{RVGL_IP_COMPUTE, "COMPUTE"}, {RVGL_IP_SDMA, "SDMA"}};
constexpr Named kPriorities[] = {
    {RVGL_PRIORITY_NORMAL, "NORMAL"}, {RVGL_PRIORITY_LOW, "LOW"}, {RVGL_PRIORITY_HIGH, "HIGH"}};
constexpr Named kQueueStates[] = {{RVGL_QUEUE_STATE_OK, "OK"}, {RVGL_QUEUE_STATE_LOST, "LOST"}};
constexpr Named kQueueFlags[] = {{RVGL_QUEUE_FLAG_GUILTY, "GUILTY"},
                                 {RVGL_QUEUE_FLAG_INNOCENT, "INNOCENT"},
                                 {RVGL_QUEUE_FLAG_VRAM_LOST, "VRAM_LOST"},
                                 {RVGL_QUEUE_FLAG_VM_FAULT, "VM_FAULT"},
                                 {RVGL_QUEUE_FLAG_HANG, "HANG"}};

// ---- requests: the header's cmd/len/seqno/rsp_off are shown by the caller ----

void nothing_req(const rvgl_req_nop &, std::span<const uint8_t>, Decoded &) {}

void query_info_req(const rvgl_req_query_info &r, std::span<const uint8_t>, Decoded &d) {
  d.enumeration("query", r.query, kInfoQueries);
  d.num("pad", r.pad);
}

void bo_create_req(const rvgl_req_bo_create &r, std::span<const uint8_t>, Decoded &d) {
  d.hex("size", r.size);
  d.hex("alignment", r.alignment);
  d.flags("domain", r.domain, kDomains);
  d.flags("flags", r.flags, kBoFlags);
  d.num("blob_id", r.blob_id);
}

void bo_free_req(const rvgl_req_bo_free &r, std::span<const uint8_t>, Decoded &d) {
  d.num("bo", r.bo);
  d.num("pad", r.pad);
}

void va_map_req(const rvgl_req_va_map &r, std::span<const uint8_t>, Decoded &d) {
  d.num("bo", r.bo);
  d.num("res_id", r.res_id);
  d.hex("offset", r.offset);
  d.hex("va", r.va);
  d.hex("size", r.size);
  d.flags("flags", r.flags, kVaFlags);
  d.num("pad", r.pad);
}

void va_unmap_req(const rvgl_req_va_unmap &r, std::span<const uint8_t>, Decoded &d) {
  d.hex("va", r.va);
  d.hex("size", r.size);
}

void queue_create_req(const rvgl_req_queue_create &r, std::span<const uint8_t>, Decoded &d) {
  d.enumeration("kind", r.kind, kQueueKinds);
  d.enumeration("ip", r.ip, kIps);
  d.enumeration("priority", r.priority, kPriorities);
  d.num("ring_idx", r.ring_idx);
  d.hex("queue_va", r.queue_va);
  d.hex("queue_size", r.queue_size);
  d.hex("rptr_va", r.rptr_va);
  d.hex("wptr_va", r.wptr_va);
  d.hex("eop_va", r.eop_va);
  d.num("doorbell_bo", r.doorbell_bo);
  d.num("doorbell_offset", r.doorbell_offset);
}

void queue_only_req(uint32_t queue, uint32_t pad, Decoded &d) {
  d.num("queue", queue);
  d.num("pad", pad);
}
void queue_destroy_req(const rvgl_req_queue_destroy &r, std::span<const uint8_t>, Decoded &d) {
  queue_only_req(r.queue, r.pad, d);
}
void queue_state_req(const rvgl_req_queue_state &r, std::span<const uint8_t>, Decoded &d) {
  queue_only_req(r.queue, r.pad, d);
}

// The arrays after the fixed part are guest-sized: only what the frame really holds is read.
void submit_req(const rvgl_req_submit &r, std::span<const uint8_t> tail, Decoded &d) {
  d.num("queue", r.queue);
  d.hex("flags", r.flags);
  d.num("num_ibs", r.num_ibs);
  d.num("num_waits", r.num_waits);
  const size_t fit = tail.size() / sizeof(rvgl_ib);
  const size_t ibs_shown = std::min<size_t>(r.num_ibs, fit);
  std::vector<Decoded> ibs(ibs_shown);
  for (size_t i = 0; i < ibs_shown; ++i) {
    rvgl_ib ib;
    std::memcpy(&ib, tail.data() + i * sizeof(ib), sizeof(ib));
    ibs[i].hex("va", ib.va);
    ibs[i].num("size", ib.size);
    ibs[i].hex("flags", ib.flags);
  }
  d.list("ibs", ibs);
  const size_t waits_fit = fit - ibs_shown;
  const size_t waits_shown = std::min<size_t>(r.num_waits, waits_fit);
  std::vector<Decoded> waits(waits_shown);
  for (size_t i = 0; i < waits_shown; ++i) {
    rvgl_wait w;
    std::memcpy(&w, tail.data() + (ibs_shown + i) * sizeof(w), sizeof(w));
    waits[i].num("queue", w.queue);
    waits[i].num("pad", w.pad);
    waits[i].num("seq", w.seq);
  }
  d.list("waits", waits);
  const uint64_t need = (uint64_t{r.num_ibs} + r.num_waits) * sizeof(rvgl_ib);
  if (need > tail.size())
    d.problem(fmt::format("arrays truncated: num_ibs {} + num_waits {} need {} bytes, {} present",
                          r.num_ibs, r.num_waits, need, tail.size()));
  else if (need < tail.size())
    d.problem(fmt::format("{} bytes after the arrays", tail.size() - need));
}

void spm_acquire_req(const rvgl_req_spm_acquire &r, std::span<const uint8_t>, Decoded &d) {
  d.num("xcp", r.xcp);
  d.num("ring_idx", r.ring_idx);
}

void spm_release_req(const rvgl_req_spm_release &r, std::span<const uint8_t>, Decoded &d) {
  d.num("xcp", r.xcp);
  d.num("pad", r.pad);
}

void spm_set_dest_req(const rvgl_req_spm_set_dest &r, std::span<const uint8_t>, Decoded &d) {
  d.num("xcp", r.xcp);
  d.num("bo", r.bo);
  d.num("res_id", r.res_id);
  d.num("timeout_ms", r.timeout_ms);
  d.hex("offset", r.offset);
  d.hex("size", r.size);
}

// ---- responses: hdr.result and hdr.seqno are shown by the caller ----

void nothing_rsp(const rvgl_rsp_hdr &, Decoded &) {}

void info_memory(const rvgl_info_memory &m, Decoded &d) {
  d.num("vram_total", m.vram_total);
  d.num("vram_used", m.vram_used);
  d.num("visible_vram_total", m.visible_vram_total);
  d.num("visible_vram_used", m.visible_vram_used);
  d.num("gtt_total", m.gtt_total);
  d.num("gtt_used", m.gtt_used);
}

void info_usage(const rvgl_info_usage &u, Decoded &d) {
  d.num("objects", u.objects);
  d.num("vram_bytes", u.vram_bytes);
  d.num("gtt_bytes", u.gtt_bytes);
  d.num("userptr_bytes", u.userptr_bytes);
  d.num("queues", u.queues);
  d.num("max_objects", u.max_objects);
  d.num("max_vram_bytes", u.max_vram_bytes);
  d.num("max_gtt_bytes", u.max_gtt_bytes);
  d.num("max_userptr_bytes", u.max_userptr_bytes);
  d.num("max_queues", u.max_queues);
}

void query_info_rsp(const rvgl_rsp_query_info &r, Decoded &d) {
  d.enumeration("query", r.query, kInfoQueries);
  d.num("size", r.size);
  const uint32_t valid = std::min<uint32_t>(r.size, RVGL_INFO_DATA_SIZE);
  if (r.size > RVGL_INFO_DATA_SIZE)
    d.problem(fmt::format("size {} exceeds the {}-byte data area", r.size, RVGL_INFO_DATA_SIZE));
  Decoded data;
  if (r.query == RVGL_INFO_MEMORY && valid >= sizeof(rvgl_info_memory))
    info_memory(r.data.memory, data);
  else if (r.query == RVGL_INFO_USAGE && valid >= sizeof(rvgl_info_usage))
    info_usage(r.data.usage, data);
  else if (r.query == RVGL_INFO_TIMESTAMP && valid >= sizeof(rvgl_info_timestamp))
    data.num("gpu_timestamp", r.data.timestamp.gpu_timestamp);
  else
    data.bytes("raw", std::span(r.data.raw, valid));
  d.list("data", {data});
}

void bo_create_rsp(const rvgl_rsp_bo_create &r, Decoded &d) {
  d.num("bo", r.bo);
  d.num("pad", r.pad);
}

void queue_create_rsp(const rvgl_rsp_queue_create &r, Decoded &d) {
  d.num("queue", r.queue);
  d.num("pad", r.pad);
}

void submit_rsp(const rvgl_rsp_submit &r, Decoded &d) {
  d.num("seq", r.seq);
}

void queue_state_rsp(const rvgl_rsp_queue_state &r, Decoded &d) {
  d.enumeration("state", r.state, kQueueStates);
  d.flags("flags", r.flags, kQueueFlags);
  d.num("last_submitted_seq", r.last_submitted_seq);
  d.num("last_completed_seq", r.last_completed_seq);
  d.result("error", r.error);
  d.num("pad", r.pad);
}

void spm_set_dest_rsp(const rvgl_rsp_spm_set_dest &r, Decoded &d) {
  d.num("bytes_copied", r.bytes_copied);
  d.num("has_data_loss", r.has_data_loss);
  d.num("timeout_left_ms", r.timeout_left_ms);
  d.num("pad", r.pad);
}

// Copies the fixed part out of the (already long enough) bytes, so structs are read aligned.
// Bytes past the fixed part are SUBMIT's arrays, or fields of a later minor version the host
// ignores (worth a note, not an error).
template <class T, auto Fn, bool Arrays>
void request_thunk(std::span<const uint8_t> b, Decoded &d) {
  T v;
  std::memcpy(&v, b.data(), sizeof(T));
  Fn(v, b.subspan(sizeof(T)), d);
  if (!Arrays && b.size() > sizeof(T))
    d.note(fmt::format("{} bytes past the v1 struct, ignored by a v1 host", b.size() - sizeof(T)));
}

template <class T, auto Fn>
void response_thunk(std::span<const uint8_t> b, Decoded &d) {
  T v;
  std::memcpy(&v, b.data(), sizeof(T));
  Fn(v, d);
}

// A row, checked against the layout table: the struct the printer reads is the one the host
// dispatches with.
template <uint32_t Cmd, class Req, auto ReqFn, class Rsp, auto RspFn>
constexpr CommandDecoder row() {
  static_assert(find_layout(Cmd) != nullptr, "a v1 command");
  static_assert(find_layout(Cmd)->req_size == sizeof(Req));
  static_assert(find_layout(Cmd)->rsp_size == sizeof(Rsp));
  return {Cmd, find_layout(Cmd), &request_thunk<Req, ReqFn, Cmd == RVGL_CMD_SUBMIT>,
          &response_thunk<Rsp, RspFn>};
}

// Header-only bodies read through the smallest struct (the header).
using ReqHdr = rvgl_req_nop;
using RspHdr = rvgl_rsp_hdr;

constexpr std::array<CommandDecoder, RVGL_CMD_COUNT - 1> kCommands = {{
    row<RVGL_CMD_NOP, ReqHdr, nothing_req, RspHdr, nothing_rsp>(),
    row<RVGL_CMD_QUERY_INFO, rvgl_req_query_info, query_info_req, rvgl_rsp_query_info,
        query_info_rsp>(),
    row<RVGL_CMD_BO_CREATE, rvgl_req_bo_create, bo_create_req, rvgl_rsp_bo_create, bo_create_rsp>(),
    row<RVGL_CMD_BO_FREE, rvgl_req_bo_free, bo_free_req, RspHdr, nothing_rsp>(),
    row<RVGL_CMD_VA_MAP, rvgl_req_va_map, va_map_req, RspHdr, nothing_rsp>(),
    row<RVGL_CMD_VA_UNMAP, rvgl_req_va_unmap, va_unmap_req, RspHdr, nothing_rsp>(),
    row<RVGL_CMD_QUEUE_CREATE, rvgl_req_queue_create, queue_create_req, rvgl_rsp_queue_create,
        queue_create_rsp>(),
    row<RVGL_CMD_QUEUE_DESTROY, rvgl_req_queue_destroy, queue_destroy_req, RspHdr, nothing_rsp>(),
    row<RVGL_CMD_SUBMIT, rvgl_req_submit, submit_req, rvgl_rsp_submit, submit_rsp>(),
    row<RVGL_CMD_QUEUE_STATE, rvgl_req_queue_state, queue_state_req, rvgl_rsp_queue_state,
        queue_state_rsp>(),
    row<RVGL_CMD_SPM_ACQUIRE, rvgl_req_spm_acquire, spm_acquire_req, RspHdr, nothing_rsp>(),
    row<RVGL_CMD_SPM_RELEASE, rvgl_req_spm_release, spm_release_req, RspHdr, nothing_rsp>(),
    row<RVGL_CMD_SPM_SET_DEST, rvgl_req_spm_set_dest, spm_set_dest_req, rvgl_rsp_spm_set_dest,
        spm_set_dest_rsp>(),
}};

constexpr bool covers_every_layout() {
  for (const auto &l : kV1Commands) {
    bool found = false;
    for (const auto &c : kCommands)
      found |= c.cmd == l.cmd && c.layout == &l;
    if (!found) return false;
  }
  return true;
}
static_assert(covers_every_layout(), "a decoder row for every v1 command of command_layouts.h");

}  // namespace

const CommandDecoder *find_command(uint32_t cmd) {
  for (const auto &c : kCommands)
    if (c.cmd == cmd) return &c;
  return nullptr;
}

std::span<const CommandDecoder> all_commands() {
  return kCommands;
}

}  // namespace rvgl::trace
