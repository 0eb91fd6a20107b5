#include "spm_recording.h"

#include <cstring>

namespace rvgl::spm {

bool SpmRecordingWriter::open(const std::string &path, const SpmRecordingHeader &h) {
  f_ = std::fopen(path.c_str(), "wbe");
  if (!f_) return false;
  SpmRecordingHeader hdr = h;
  std::memcpy(hdr.magic, kFileMagic, sizeof(kFileMagic));
  hdr.version = 1;
  return std::fwrite(&hdr, sizeof(hdr), 1, f_) == 1;
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
  if (!ok || std::memcmp(h.magic, kFileMagic, sizeof(kFileMagic)) || h.version != 1) {
    *error = "not an SPM recording (bad magic or version)";
    ok = false;
  } else if (h.num_xcc == 0 || h.num_xcc > 64 || h.global_lines == 0 || h.shader_engines > 64 ||
             h.global_lines + uint64_t{h.se_lines} * h.shader_engines > 4096) {
    *error = "implausible layout in the recording header";
    ok = false;
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
