#include "spm_recording.h"

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "spm_decode.h"

namespace rvgl::spm {

namespace {

constexpr uint32_t kMaxInfoBytes = 1u << 20;

bool valid_info(const SpmRecordingHeader &h, const RecordingInfo &info) {
  if (info.counters.size() != counters_per_sample(h)) return false;
  for (const auto &c : info.counters)
    if (!valid_counter_name(c.name) || !valid_counter_unit(c.unit)) return false;
  return valid_counter_unit(info.device);  // the same printable set
}

// The JSON block of a version 2 file; false when it is not what the writer writes.
bool parse_info(const std::string &text, const SpmRecordingHeader &h, RecordingInfo *out) {
  const auto doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object() || !doc.contains("device") || !doc["device"].is_string() ||
      !doc.contains("counters") || !doc["counters"].is_array())
    return false;
  out->device = doc["device"].get<std::string>();
  out->counters.clear();
  for (const auto &c : doc["counters"]) {
    if (!c.is_array() || c.size() != 2 || !c[0].is_string() || !c[1].is_string()) return false;
    out->counters.push_back({c[0].get<std::string>(), c[1].get<std::string>()});
  }
  return valid_info(h, *out);
}

}  // namespace

bool SpmRecordingWriter::create(const std::string &path, const SpmRecordingHeader &h,
                                uint32_t version) {
  f_ = std::fopen(path.c_str(), "wbe");
  if (!f_) return false;
  SpmRecordingHeader hdr = h;
  std::memcpy(hdr.magic, kFileMagic, sizeof(kFileMagic));
  hdr.version = version;
  return std::fwrite(&hdr, sizeof(hdr), 1, f_) == 1;
}

bool SpmRecordingWriter::open(const std::string &path, const SpmRecordingHeader &h,
                              const RecordingInfo &info) {
  if (!valid_info(h, info)) {
    errno = EINVAL;
    return false;
  }
  nlohmann::json counters = nlohmann::json::array();
  for (const auto &c : info.counters)
    counters.push_back({c.name, c.unit});
  const std::string text = nlohmann::json{{"device", info.device}, {"counters", counters}}.dump();
  const uint32_t block[2] = {kInfoMagic, static_cast<uint32_t>(text.size())};
  return create(path, h, kRecordingVersion) && std::fwrite(block, sizeof(block), 1, f_) == 1 &&
         std::fwrite(text.data(), 1, text.size(), f_) == text.size();
}

bool SpmRecordingWriter::open_v1(const std::string &path, const SpmRecordingHeader &h) {
  return create(path, h, 1);
}

bool SpmRecordingWriter::append(const uint8_t *buf, uint32_t size) {
  const uint32_t rec[2] = {kRecordMagic, size};
  return f_ && std::fwrite(rec, sizeof(rec), 1, f_) == 1 && std::fwrite(buf, 1, size, f_) == size;
}

SpmRecordingWriter::~SpmRecordingWriter() {
  if (f_) std::fclose(f_);
}

bool read_recording(const std::string &path, SpmRecording *out, std::string *error) {
  FILE *f = std::fopen(path.c_str(), "rbe");
  if (!f) {
    *error = "cannot open " + path;
    return false;
  }
  bool ok = std::fread(&out->header, sizeof(out->header), 1, f) == 1;
  const auto &h = out->header;
  if (!ok || std::memcmp(h.magic, kFileMagic, sizeof(kFileMagic)) || h.version == 0 ||
      h.version > kRecordingVersion) {
    *error = "not an SPM recording (bad magic or version)";
    ok = false;
  } else if (h.num_xcc == 0 || h.num_xcc > 64 || h.global_lines == 0 || h.shader_engines > 64 ||
             h.global_lines + uint64_t{h.se_lines} * h.shader_engines > 4096) {
    *error = "implausible layout in the recording header";
    ok = false;
  }
  if (ok && h.version == 1) {
    out->info = {"", layout_counter_names(h)};
  } else if (ok) {
    uint32_t block[2];
    std::string text;
    ok = std::fread(block, sizeof(block), 1, f) == 1 && block[0] == kInfoMagic &&
         block[1] <= kMaxInfoBytes;
    if (ok) {
      text.resize(block[1]);
      ok = std::fread(text.data(), 1, text.size(), f) == text.size();
    }
    if (!ok || !parse_info(text, h, &out->info)) {
      *error = "corrupt counter names block";
      ok = false;
    }
  }
  while (ok) {
    uint32_t rec[2];
    if (std::fread(rec, sizeof(rec), 1, f) != 1) break;  // clean end
    if (rec[0] != kRecordMagic || rec[1] > (256u << 20)) {
      *error = "corrupt record";
      ok = false;
      break;
    }
    std::vector<uint8_t> buf(rec[1]);
    if (std::fread(buf.data(), 1, buf.size(), f) != buf.size()) {
      *error = "truncated record";
      ok = false;
      break;
    }
    out->buffers.push_back(std::move(buf));
  }
  std::fclose(f);
  return ok;
}

}  // namespace rvgl::spm
