#include "context/frame_decoder.h"

#include <array>
#include <cerrno>
#include <cstring>
#include <new>

namespace rvgl {

const char *frame_error_name(FrameError e) {
  switch (e) {
    case FrameError::kNone:
      return "none";
    case FrameError::kTruncatedHeader:
      return "truncated header";
    case FrameError::kLengthTooShort:
      return "length shorter than header";
    case FrameError::kLengthPastEnd:
      return "length past end of buffer";
    case FrameError::kLengthUnaligned:
      return "length not a multiple of 8";
    case FrameError::kSeqnoOrder:
      return "seqno not after the previous one";
    case FrameError::kRspUnaligned:
      return "rsp_off not a multiple of 8";
    case FrameError::kRspOutOfRange:
      return "response outside the response area";
    case FrameError::kNoSharedPage:
      return "response slot without a shared page";
    case FrameError::kTooLarge:
      return "command buffer over the submit limit";
  }
  return "?";
}

FrameDecoder::FrameDecoder(const CommandTable &table, void *target, size_t max_submit_bytes)
    : table_(table), target_(target), max_submit_bytes_(max_submit_bytes) {}

namespace {

// Bytes every request and response buffer has (a request header; the response shadow and the
// scratch buffer are at least this large), handled with fixed-size copies.
constexpr size_t kFixedBytes = sizeof(rvgl_req_hdr);

// Serial-number order (RFC 1982 style) so seqnos may wrap.
bool seqno_after(uint32_t seqno, uint32_t last) {
  return static_cast<int32_t>(seqno - last) > 0;
}

}  // namespace

SubmitOutcome FrameDecoder::run(std::span<const uint8_t> stream, ShmemView &shmem) {
  SubmitOutcome out;
  auto fail = [&](FrameError e, size_t at) {
    out.error = -EINVAL;
    out.frame_error = e;
    out.error_offset = at;
    if (shmem.valid()) shmem.bump_async_error();
    return out;
  };
  if (stream.size() > max_submit_bytes_) return fail(FrameError::kTooLarge, 0);

  size_t pos = 0;
  while (pos < stream.size()) {
    const size_t left = stream.size() - pos;
    if (left < sizeof(rvgl_req_hdr)) return fail(FrameError::kTruncatedHeader, pos);
    rvgl_req_hdr hdr;
    std::memcpy(&hdr, stream.data() + pos, sizeof(hdr));
    if (hdr.len < sizeof(rvgl_req_hdr)) return fail(FrameError::kLengthTooShort, pos);
    if (hdr.len > left) return fail(FrameError::kLengthPastEnd, pos);
    if (hdr.len % RVGL_ALIGNMENT) return fail(FrameError::kLengthUnaligned, pos);
    if (!seqno_after(hdr.seqno, last_seqno_)) return fail(FrameError::kSeqnoOrder, pos);

    const CommandEntry *entry = table_.find(hdr.cmd);
    const uint32_t rsp_size = entry ? entry->rsp_size : uint32_t{sizeof(rvgl_rsp_hdr)};
    const bool has_rsp = hdr.rsp_off != RVGL_RSP_NONE;
    if (has_rsp) {
      if (!shmem.valid()) return fail(FrameError::kNoSharedPage, pos);
      if (hdr.rsp_off % RVGL_ALIGNMENT) return fail(FrameError::kRspUnaligned, pos);
      if (uint64_t{hdr.rsp_off} + rsp_size > shmem.rsp_area_size())
        return fail(FrameError::kRspOutOfRange, pos);
    }

    // Zeroed as far as this command's response goes (a NOP's is 8 bytes, not the 128 maximum):
    // a fixed-size head the compiler inlines, the rest only where there is one.
    alignas(8) std::array<uint8_t, RVGL_MAX_RSP_SIZE> shadow;
    std::memset(shadow.data(), 0, kFixedBytes);
    if (rsp_size > kFixedBytes) std::memset(shadow.data() + kFixedBytes, 0, rsp_size - kFixedBytes);
    Response rsp{std::span<uint8_t>(shadow.data(), rsp_size)};
    int32_t result = -ENOSYS;
    // A request the host has no memory for is answered, as any other: a guest waits for its
    // response (or its seqno) whatever became of it. Handlers leave nothing half made when an
    // allocation fails (tests/robustness/alloc_sweep.cpp).
    try {
      if (entry) {
        const size_t need = hdr.len > entry->req_size ? hdr.len : entry->req_size;
        const size_t words = (need + 7) / 8;
        if (scratch_.size() < words) scratch_.resize(words);
        auto *buf = reinterpret_cast<uint8_t *>(scratch_.data());
        // Every request has its 16-byte header (checked above): copied inline, the rest (if any)
        // by the library.
        std::memcpy(buf, stream.data() + pos, kFixedBytes);
        if (hdr.len > kFixedBytes)
          std::memcpy(buf + kFixedBytes, stream.data() + pos + kFixedBytes, hdr.len - kFixedBytes);
        if (need > hdr.len) std::memset(buf + hdr.len, 0, need - hdr.len);
        const Request req{hdr.cmd, hdr.seqno, hdr.rsp_off, hdr.len, {buf, need}};
        result = entry->handler(target_, req, rsp);
      }
    } catch (const std::bad_alloc &) {
      std::memset(shadow.data(), 0, rsp_size);
      result = -ENOMEM;
    }
    last_seqno_ = hdr.seqno;
    ++out.processed;

    if (result != kDeferred) {
      auto &rh = rsp.as<rvgl_rsp_hdr>();
      rh.result = result;
      rh.seqno = hdr.seqno;
      if (observer_) observer_(hdr.cmd, hdr.seqno, rsp.bytes);
      if (has_rsp) {
        shmem.write_response(hdr.rsp_off, rsp.bytes);
      } else if (result < 0 && shmem.valid()) {
        shmem.bump_async_error();
      }
    }
    if (shmem.valid()) shmem.publish_seqno(hdr.seqno);
    pos += hdr.len;
  }
  return out;
}

}  // namespace rvgl
