#include "spm_decode.h"

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
                   std::vector<Sample> *out, DecodeStats *stats, std::string *error) {
  const uint32_t slice = static_cast<uint32_t>(buf.size() / layout.num_xcc) & ~31u;
  const uint32_t sample_bytes = lines_per_sample(layout) * kLineBytes;
  std::map<uint32_t, uint64_t> last_ts;
  for (const auto &s : *out)
    last_ts[s.xcc] = s.timestamp;
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
    if (h.has_data_loss) ++stats->slices_with_loss;
    if (h.bytes_copied > slice - sizeof(h)) {
      *error = "slice header claims more bytes than the slice holds";
      return false;
    }
    stats->bytes += h.bytes_copied;
    const uint8_t *p = base + sizeof(h);
    for (uint32_t off = 0; off + sample_bytes <= h.bytes_copied; off += sample_bytes) {
      Sample s;
      s.xcc = x;
      std::memcpy(&s.timestamp, p + off, sizeof(s.timestamp));
      s.counters.resize(counters_per_sample(layout));
      std::memcpy(s.counters.data(), p + off + kTimestampSlots * 2, s.counters.size() * 2);
      auto it = last_ts.find(x);
      if (it != last_ts.end() && s.timestamp <= it->second) ++stats->timestamp_regressions;
      last_ts[x] = s.timestamp;
      out->push_back(std::move(s));
      ++stats->samples;
    }
  }
  return true;
}

}  // namespace rvgl::spm
