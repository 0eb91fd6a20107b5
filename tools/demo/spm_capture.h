// The demo's `spm` mode as a library (the end-to-end tests call it too): take the SPM through the
// protocol, let it stream into consecutive destination buffers carved from one GUEST userptr
// blob, and turn what came back into files with tools/spm's decoder and exporters — a CSV of
// samples, a Chrome/Perfetto trace-event JSON and, optionally, a recording rvgl-spm reads.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "compute_client.h"
#include "spm_decode.h"
#include "spm_recording.h"

namespace rvgl::demo {

struct SpmCaptureOptions {
  uint32_t buffers = 4;               // destination buffers recorded, one after the other
  uint64_t buffer_bytes = 64 * 1024;  // each; a multiple of 32, at least 32 bytes per XCC
  uint32_t xcp = 0;
  uint32_t ring_idx = 8;  // bound for SPM fences while the SPM is held; not used by a queue
  // How long each SET_DEST lets the kernel wait for the previous buffer to fill; a buffer that
  // does not fill in time is retired with what it has.
  uint32_t fill_timeout_ms = 2000;
  std::string out_dir;             // must exist
  bool write_recording = true;     // spm-recording.bin, for `rvgl-spm --png`
  std::vector<uint32_t> counters;  // exported counters; empty: the first 8
  // The same as rvgl-spm's --counters (indices, names or "all"); when given, replaces counters.
  std::vector<std::string> counter_selection;
  // Names for the counters (spm_counters.h: "INDEX NAME [UNIT]" lines) when the host's SPM
  // programming is known; the others keep the names of their place in the sample layout.
  std::string counter_names_file;
  // Sample layout of the host's SPM programming: lines of the global segment and per shader
  // engine (the emulator's; a real host's depends on the counters it selected).
  uint32_t global_lines = 2;
  uint32_t se_lines = 1;
};

// What the host answered for one retired destination.
struct RetiredBuffer {
  uint32_t bytes_copied = 0;   // SET_DEST response
  uint32_t has_data_loss = 0;  // SET_DEST response: slices that lost data
  uint64_t decoded_bytes = 0;  // sample bytes the slice headers account for
  uint64_t samples = 0;
};

struct SpmCapture {
  spm::SpmRecordingHeader layout{};
  spm::RecordingInfo info;  // the device and the counters' names, as the recording stores them
  uint64_t dest_bytes = 0;  // each destination as given to SET_DEST (<= buffer_bytes)
  std::vector<RetiredBuffer> buffers;
  spm::DecodeStats stats;
  std::string csv_path;
  std::string trace_path;
  std::string recording_path;  // empty unless written
};

// Fails with the host's errno (-ENODEV without the SPM feature, -EBUSY when someone else holds
// it, ...) or -EIO when the files cannot be written. Releases the SPM before returning.
Result<SpmCapture> capture_spm(ComputeClient &client, const SpmCaptureOptions &options);

}  // namespace rvgl::demo
