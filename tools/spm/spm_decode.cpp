#include "spm_decode.h"

#include <algorithm>
#include <cstring>
#include <map>

#include "rocm_virgl_protocol.h"

namespace rvgl::spm {

namespace {
constexpr uint32_t kLineBytes = 32;
constexpr uint32_t kTimestampSlots = 4;  // 64-bit timestamp in the first four u16 of line 0
}  // namespace

uint32_t lines_per_sample(const SpmRecordingHeader &h) {
  return h.global_lines + h.se_lines * h.shader_engines;
}

uint32_t counters_per_sample(const SpmRecordingHeader &h) {
  return lines_per_sample(h) * 16 - kTimestampSlots;
}

bool decode_buffer(const SpmRecordingHeader &layout, std::span<const uint8_t> buf,
                   std::vector<Sample> *out, DecodeStats *stats, std::string *error,
                   StreamState *stream) {
  if (layout.num_xcc == 0) {
    *error = "recording header has no XCC";
    return false;
  }
  const uint32_t slice = static_cast<uint32_t>(buf.size() / layout.num_xcc) & ~31u;
  const uint32_t sample_bytes = lines_per_sample(layout) * kLineBytes;
  StreamState local;
  if (!stream) {
    stream = &local;
    for (const auto &s : *out)
      local.last_timestamp[s.xcc] = s.timestamp;
  }
  ++stats->buffers;
  for (uint32_t x = 0; x < layout.num_xcc; ++x) {
    const uint8_t *base = buf.data() + size_t{x} * slice;
    if (slice < sizeof(rvgl_spm_buffer_header)) {
      *error = "buffer too small for one header per XCC";
      return false;
    }
    rvgl_spm_buffer_header h;
    std::memcpy(&h, base, sizeof(h));
    ++stats->slices;
    if (h.bytes_copied > slice - sizeof(h)) {
      *error = "slice header claims more bytes than the slice holds";
      return false;
    }
    stats->bytes += h.bytes_copied;
    std::vector<uint8_t> &partial = stream->partial[x];
    if (h.has_data_loss) {
      ++stats->slices_with_loss;
      partial.clear();  // what came before the gap cannot be joined to what follows it
    }
    const uint8_t *p = base + sizeof(h);
    uint32_t left = h.bytes_copied;
    auto emit = [&](const uint8_t *sample) {
      Sample s;
      s.xcc = x;
      std::memcpy(&s.timestamp, sample, sizeof(s.timestamp));
      s.counters.resize(counters_per_sample(layout));
      std::memcpy(s.counters.data(), sample + kTimestampSlots * 2, s.counters.size() * 2);
      auto it = stream->last_timestamp.find(x);
      if (it != stream->last_timestamp.end() && s.timestamp <= it->second)
        ++stats->timestamp_regressions;
      stream->last_timestamp[x] = s.timestamp;
      out->push_back(std::move(s));
      ++stats->samples;
    };
    if (!partial.empty()) {
      const uint32_t take = std::min<uint32_t>(left, sample_bytes - partial.size());
      partial.insert(partial.end(), p, p + take);
      p += take;
      left -= take;
      if (partial.size() == sample_bytes) {
        emit(partial.data());
        partial.clear();
      }
    }
    for (; left >= sample_bytes; p += sample_bytes, left -= sample_bytes)
      emit(p);
    if (stream != &local && left) partial.assign(p, p + left);
  }
  return true;
}

}  // namespace rvgl::spm
