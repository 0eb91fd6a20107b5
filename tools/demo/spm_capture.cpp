#include "spm_capture.h"

#include <cerrno>
#include <cstring>

#include "spm_counters.h"
#include "spm_export.h"
#include "spm_recording.h"

namespace rvgl::demo {

namespace {

using guest::make_error;

// Sends one SPM request and waits for its response, which for SET_DEST comes only when the kernel
// has retired the previous buffer: up to `extra` longer than the session's usual bound.
template <class Rsp, class F>
Result<Rsp> spm_call(guest::Session &s, F &&encode, std::chrono::milliseconds extra = {}) {
  guest::RequestEncoder enc = s.encoder();
  auto t = encode(enc);
  if (!t) return t.error();
  if (auto st = s.submit(enc); !st) return st.error();
  auto r = s.wait(*t, s.options().timeout + extra);
  if (!r) return r.error();
  if (r->result != 0) return make_error(r->result, "SPM request " + std::to_string(t->cmd));
  return r->template as<Rsp>();
}

// Holds the SPM of one partition; gives it back however capture_spm leaves.
class SpmHold {
 public:
  SpmHold(guest::Session &s, uint32_t xcp) : s_(s), xcp_(xcp) {}
  ~SpmHold() {
    if (held_) (void)release();
  }
  SpmHold(const SpmHold &) = delete;
  SpmHold &operator=(const SpmHold &) = delete;

  Status acquire(uint32_t ring_idx) {
    auto r = spm_call<rvgl_rsp_spm_acquire>(
        s_, [&](guest::RequestEncoder &e) { return e.spm_acquire(xcp_, ring_idx); });
    if (!r) return r.error();
    held_ = true;
    return {};
  }
  Status release() {
    held_ = false;
    return spm_call<rvgl_rsp_spm_release>(
               s_, [&](guest::RequestEncoder &e) { return e.spm_release(xcp_); })
        .status();
  }

 private:
  guest::Session &s_;
  uint32_t xcp_;
  bool held_ = false;
};

// A blob given back to the host on every way out, so a failed capture leaves nothing behind.
struct OwnedBuffer {
  ComputeClient &client;
  GpuBuffer buf;
  bool owned = true;
  ~OwnedBuffer() {
    if (owned) (void)client.release(std::move(buf));
  }
  Status release() {
    owned = false;
    return client.release(std::move(buf));
  }
};

Status check_options(const rvgl_capset &cap, const SpmCaptureOptions &o) {
  if (!(cap.features & RVGL_FEATURE_SPM) || cap.num_xcp == 0)
    return make_error(-ENODEV, "the host offers no SPM (capset feature bit clear)");
  if (o.xcp >= cap.num_xcp) return make_error(-EINVAL, "no such SPM partition");
  if (o.buffers == 0 || o.buffers > 4096) return make_error(-EINVAL, "1 to 4096 buffers");
  if (o.buffer_bytes > (256u << 20)) return make_error(-EINVAL, "a buffer is 256 MiB at most");
  if (o.out_dir.empty()) return make_error(-EINVAL, "no output directory");
  if (o.global_lines == 0) return make_error(-EINVAL, "a sample has at least one global line");
  return {};
}

// "AMD Radeon RX 7900 XTX (gfx IP 11.0.0)", with anything a label may not hold blanked.
std::string device_label(const rvgl_capset &cap) {
  std::string name(cap.marketing_name, strnlen(cap.marketing_name, sizeof(cap.marketing_name)));
  for (char &ch : name)
    if (!spm::valid_counter_unit(std::string_view(&ch, 1))) ch = ' ';
  if (name.empty()) name = "unnamed device";
  return name + " (gfx IP " + std::to_string(cap.gfx_ip_major) + "." +
         std::to_string(cap.gfx_ip_minor) + "." + std::to_string(cap.gfx_ip_stepping) + ")";
}

}  // namespace

Result<SpmCapture> capture_spm(ComputeClient &c, const SpmCaptureOptions &o) {
  const rvgl_capset &cap = c.capset();
  const uint32_t xccs = cap.num_xcc ? cap.num_xcc : 1;
  if (auto s = check_options(cap, o); !s) return s.error();

  SpmCapture out;
  out.layout.num_xcc = xccs;
  out.layout.global_lines = o.global_lines;
  out.layout.se_lines = o.se_lines;
  out.layout.shader_engines = cap.num_shader_engines / xccs;
  out.layout.counter_freq_khz = cap.gpu_counter_freq_khz;
  out.info.device = device_label(cap);
  out.info.counters = spm::layout_counter_names(out.layout);
  if (!o.counter_names_file.empty()) {
    std::string err;
    if (!spm::read_counter_names(o.counter_names_file, &out.info.counters, &err))
      return make_error(-EINVAL, err);
  }
  std::vector<uint32_t> exported = o.counters;
  if (!o.counter_selection.empty()) {
    std::string err;
    if (!spm::select_counters(o.counter_selection, out.info.counters, 8, &exported, &err))
      return make_error(-EINVAL, err);
  }

  const uint64_t sample_bytes = uint64_t{spm::lines_per_sample(out.layout)} * 32;
  const uint64_t per_xcc = (o.buffer_bytes / xccs) & ~uint64_t{31};
  const uint64_t samples_per_slice = per_xcc > 32 ? (per_xcc - 32) / sample_bytes : 0;
  if (samples_per_slice == 0)
    return make_error(-EINVAL, "a buffer must hold at least one sample per XCC (" +
                                   std::to_string(xccs * (32 + sample_bytes)) + " bytes)");
  out.dest_bytes = xccs * (32 + samples_per_slice * sample_bytes);

  // One guest blob holds every destination, so the kernel writes straight into guest pages.
  // Blobs are whole pages.
  const uint64_t total = (out.dest_bytes * o.buffers + 4095) & ~uint64_t{4095};
  auto created = c.create_userptr(total);
  if (!created) return created.error();
  OwnedBuffer blob{c, std::move(*created)};

  guest::Session &s = c.session();
  const auto fill = std::chrono::milliseconds(o.fill_timeout_ms);
  {
    SpmHold hold(s, o.xcp);
    if (auto st = hold.acquire(o.ring_idx); !st) return st.error();
    // Destination i + 1 retires destination i; the last SET_DEST (size 0) retires the last one
    // and stops the stream. The first swaps at once: there is nothing to retire yet.
    for (uint32_t i = 0; i <= o.buffers; ++i) {
      guest::SpmSetDestArgs a;
      a.xcp = o.xcp;
      a.timeout_ms = i == 0 ? 0 : o.fill_timeout_ms;
      if (i < o.buffers) {
        a.object = guest::ObjectRef::resource(blob.buf.blob.res_id);
        a.offset = out.dest_bytes * i;
        a.size = out.dest_bytes;
      }
      auto r = spm_call<rvgl_rsp_spm_set_dest>(
          s, [&](guest::RequestEncoder &e) { return e.spm_set_dest(a); }, fill);
      if (!r) return r.error();
      if (i > 0) out.buffers.push_back({r->bytes_copied, r->has_data_loss, 0, 0});
    }
    if (auto st = hold.release(); !st) return st.error();
  }

  spm::SpmRecordingWriter writer;
  if (o.write_recording) {
    out.recording_path = o.out_dir + "/spm-recording.bin";
    if (!writer.open(out.recording_path, out.layout, out.info))
      return make_error(-EIO, "cannot create " + out.recording_path);
  }
  std::vector<spm::Sample> samples;
  spm::StreamState stream;  // consecutive buffers are one stream (and decode in linear time)
  for (uint32_t i = 0; i < o.buffers; ++i) {
    const std::span<const uint8_t> buf =
        blob.buf.memory().subspan(out.dest_bytes * i, out.dest_bytes);
    if (o.write_recording && !writer.append(buf.data(), static_cast<uint32_t>(buf.size())))
      return make_error(-EIO, "cannot write " + out.recording_path);
    const spm::DecodeStats before = out.stats;
    std::string err;
    if (!spm::decode_buffer(out.layout, buf, &samples, &out.stats, &err, &stream))
      return make_error(-EPROTO, "buffer " + std::to_string(i) + ": " + err);
    out.buffers[i].decoded_bytes = out.stats.bytes - before.bytes;
    out.buffers[i].samples = out.stats.samples - before.samples;
  }
  if (auto st = blob.release(); !st) return st.error();

  spm::ExportOptions eo;
  eo.counters = exported;
  eo.counter_freq_khz = out.layout.counter_freq_khz;
  eo.names = out.info.counters;
  eo.device = out.info.device;
  std::string err;
  out.csv_path = o.out_dir + "/spm-samples.csv";
  out.trace_path = o.out_dir + "/spm-trace.json";
  if (!spm::write_csv(out.csv_path, samples, eo, &err) ||
      !spm::write_trace_json(out.trace_path, samples, eo, &err))
    return make_error(-EIO, err);
  return out;
}

}  // namespace rvgl::demo
