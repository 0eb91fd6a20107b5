// rvgl-demo: a small compute workload through a ROCM context on a vtest server (the stock
// virgl_test_server with librocm_virgl.so in front of libvirglrenderer), printing what it did and
// what it checked. scripts/demo.sh starts the server and runs this. Exit status: 0 when every
// check passed, 1 on a mismatch, 2 when the workload could not run at all.
//
// Modes: the default copies data through userptr, VRAM and GTT with SDMA and PM4;
// `rvgl-demo --socket S spm --buffers N --out-dir D` records the SPM stream instead
// (spm_capture.h, docs/spm.md).
#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "../common/amd_packets.h"
#include "compute_client.h"
#include "spm_capture.h"

namespace pk = rvgl::packets;
using rvgl::demo::ComputeClient;
using rvgl::demo::GpuBuffer;
using Clock = std::chrono::steady_clock;

namespace {

constexpr uint32_t kComputeRing = 1;
constexpr uint32_t kSdmaRing = 2;
constexpr uint32_t kMarkers = 16;
constexpr uint64_t kDone = 0x600dd0e5c0ffee00ull;

struct Failure {
  int status;
  std::string what;
};

template <class T>
T must(rvgl::guest::Result<T> r, const char *what) {
  if (!r) throw Failure{2, fmt::format("{}: {} ({})", what, r.error().message, r.code())};
  return std::move(*r);
}
void must(rvgl::guest::Status s, const char *what) {
  if (!s) throw Failure{2, fmt::format("{}: {} ({})", what, s.error().message, s.code())};
}

std::string features(uint64_t f) {
  static const std::pair<uint64_t, const char *> names[] = {
      {RVGL_FEATURE_USERPTR, "userptr"},
      {RVGL_FEATURE_USERPTR_RDONLY, "userptr-ro"},
      {RVGL_FEATURE_KERNEL_QUEUES, "kernel-queues"},
      {RVGL_FEATURE_USER_QUEUES, "user-queues"},
      {RVGL_FEATURE_SPM, "spm"},
      {RVGL_FEATURE_EVENT_RING, "events"},
      {RVGL_FEATURE_RESOURCE_IMPORT, "import"}};
  std::string s;
  for (const auto &[bit, name] : names)
    if (f & bit) s += (s.empty() ? "" : " ") + std::string(name);
  return s.empty() ? "none" : s;
}

// Fences a ring and waits for it; returns the milliseconds from fencing to signal.
double fence_and_wait(ComputeClient &c, uint32_t ring, const char *what) {
  const auto t0 = Clock::now();
  auto f = must(c.fence(ring), what);
  if (!must(c.wait(f, std::chrono::seconds(30)), what))
    throw Failure{1, fmt::format("{}: fence on ring {} did not signal within 30 s", what, ring)};
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

int run(const std::string &socket, uint64_t size) {
  const auto start = Clock::now();
  auto client = must(ComputeClient::connect(socket), "connect");
  ComputeClient &c = *client;
  const rvgl_capset &cap = c.capset();
  fmt::print("vtest    : {} (protocol {}), context on capset {} v{}\n", socket,
             c.transport().protocol_version(), RVGL_CAPSET_ID, RVGL_CAPSET_VERSION);
  fmt::print("capset   : wire format {}, protocol {}.{}, features: {}\n", cap.wire_format_version,
             cap.protocol_major, cap.protocol_minor, features(cap.features));
  fmt::print("device   : {} [{:04x}:{:04x}] gfx {}.{}.{}, {} CUs, VRAM {} MiB, GTT {} MiB\n",
             cap.marketing_name[0] ? cap.marketing_name : "(unnamed)", cap.pci_vendor_id,
             cap.pci_device_id, cap.gfx_ip_major, cap.gfx_ip_minor, cap.gfx_ip_stepping, cap.num_cu,
             cap.vram_size >> 20, cap.gtt_size >> 20);

  // Buffers: guest data in a userptr blob, a VRAM buffer, a GTT readback, IBs and a status word.
  std::vector<uint8_t> pattern(size);
  auto *p32 = reinterpret_cast<uint32_t *>(pattern.data());
  std::iota(p32, p32 + size / 4, 0xda7a0000u);
  GpuBuffer src = must(c.create_userptr(size, pattern, /*read_only=*/true), "userptr blob");
  GpuBuffer vram = must(c.create_buffer(size, RVGL_DOMAIN_VRAM, RVGL_BO_FLAG_CPU_ACCESS), "VRAM");
  GpuBuffer back = must(c.create_buffer(size, RVGL_DOMAIN_GTT), "GTT readback");
  GpuBuffer ibs = must(c.create_buffer(64 * 1024, RVGL_DOMAIN_GTT), "IB buffer");
  GpuBuffer status = must(c.create_buffer(4096, RVGL_DOMAIN_GTT), "status buffer");
  std::memset(vram.memory().data(), 0, size);
  std::memset(back.memory().data(), 0, size);
  std::memset(status.memory().data(), 0, 4096);
  must(c.map_gpu(src, RVGL_VA_FLAG_READ), "VA_MAP userptr");
  must(c.map_gpu(vram), "VA_MAP VRAM");
  must(c.map_gpu(back), "VA_MAP readback");
  must(c.map_gpu(ibs, RVGL_VA_FLAG_READ | RVGL_VA_FLAG_EXECUTE), "VA_MAP IBs");
  must(c.map_gpu(status), "VA_MAP status");
  fmt::print(
      "buffers  : userptr {} KiB (GUEST blob res {}, read-only), VRAM {} KiB (res {}), "
      "GTT readback {} KiB (res {}), IBs and status in GTT\n",
      size >> 10, src.blob.res_id, size >> 10, vram.blob.res_id, size >> 10, back.blob.res_id);

  const uint32_t compute = must(c.create_queue(RVGL_IP_COMPUTE, kComputeRing), "compute queue");
  const uint32_t sdma = must(c.create_queue(RVGL_IP_SDMA, kSdmaRing), "SDMA queue");
  fmt::print("queues   : compute (queue {}) on ring {}, SDMA (queue {}) on ring {}\n", compute,
             kComputeRing, sdma, kSdmaRing);

  // 1. SDMA: userptr -> VRAM, leaving the last kMarkers dwords for the compute queue.
  const uint64_t copied = size - kMarkers * 4;
  std::vector<uint32_t> ib;
  pk::sdma_copy_linear(ib, vram.va, src.va, static_cast<uint32_t>(copied));
  pk::sdma_pad(ib);
  const uint64_t s1 = must(c.submit(sdma, ibs, 0, ib), "SUBMIT SDMA copy");
  const double t1 = fence_and_wait(c, kSdmaRing, "SDMA copy");
  fmt::print(
      "step 1   : SDMA COPY_LINEAR userptr -> VRAM, {} bytes (seq {}); ring {} fence "
      "signalled after {:.3f} ms\n",
      copied, s1, kSdmaRing, t1);

  // 2. PM4 on the compute queue, after step 1: markers into the VRAM tail, then an end-of-pipe
  //    64-bit write to the status buffer.
  ib.clear();
  std::vector<uint32_t> markers(kMarkers);
  std::iota(markers.begin(), markers.end(), 0x3a3a0000u);
  pk::pm4_write_data(ib, vram.va + copied, markers);
  pk::pm4_release_mem(ib, status.va, kDone);
  const rvgl_wait after_copy{sdma, 0, s1};
  const uint64_t s2 = must(c.submit(compute, ibs, 4096, ib, {&after_copy, 1}), "SUBMIT PM4");
  const double t2 = fence_and_wait(c, kComputeRing, "PM4 writes");
  fmt::print(
      "step 2   : PM4 WRITE_DATA x{} into VRAM + RELEASE_MEM to status (seq {}, waits on "
      "SDMA seq {}); ring {} fence signalled after {:.3f} ms\n",
      kMarkers, s2, s1, kComputeRing, t2);

  // 3. SDMA: VRAM -> GTT readback, after step 2.
  ib.clear();
  pk::sdma_copy_linear(ib, back.va, vram.va, static_cast<uint32_t>(size));
  pk::sdma_pad(ib);
  const rvgl_wait after_pm4{compute, 0, s2};
  const uint64_t s3 = must(c.submit(sdma, ibs, 8192, ib, {&after_pm4, 1}), "SUBMIT SDMA readback");
  const double t3 = fence_and_wait(c, kSdmaRing, "SDMA readback");
  fmt::print(
      "step 3   : SDMA COPY_LINEAR VRAM -> GTT readback, {} bytes (seq {}, waits on "
      "compute seq {}); ring {} fence signalled after {:.3f} ms\n",
      size, s3, s2, kSdmaRing, t3);

  // Checks, through the guest's own mappings of the blobs.
  int bad = 0;
  auto check = [&](bool ok, const std::string &what) {
    fmt::print("check    : {:<58} {}\n", what, ok ? "ok" : "MISMATCH");
    bad += !ok;
  };
  const uint8_t *v = vram.memory().data();
  check(std::memcmp(v, pattern.data(), copied) == 0,
        fmt::format("VRAM == userptr data ({} bytes)", copied));
  check(std::memcmp(v + copied, markers.data(), kMarkers * 4) == 0,
        fmt::format("VRAM tail == PM4 markers ({} dwords)", kMarkers));
  check(std::memcmp(back.memory().data(), v, size) == 0,
        fmt::format("GTT readback == VRAM ({} bytes)", size));
  uint64_t done = 0;
  std::memcpy(&done, status.memory().data(), sizeof(done));
  check(done == kDone, fmt::format("RELEASE_MEM status == {:#x}", kDone));
  check(c.session().shared_page().async_error() == 0, "no asynchronous errors reported");

  const uint64_t verified = copied + kMarkers * 4 + size + sizeof(done);
  const double total = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  fmt::print("result   : {} — {} bytes verified, {} fences on 2 rings, {:.1f} ms in all\n",
             bad ? "FAIL" : "PASS", verified, 3, total);
  return bad ? 1 : 0;
}

int run_spm(const std::string &socket, const rvgl::demo::SpmCaptureOptions &o) {
  auto client = must(ComputeClient::connect(socket), "connect");
  const rvgl_capset &cap = client->capset();
  fmt::print("vtest    : {} (protocol {}), context on capset {} v{}\n", socket,
             client->transport().protocol_version(), RVGL_CAPSET_ID, RVGL_CAPSET_VERSION);
  fmt::print("spm      : version {}.{}, {} partition(s), {} XCC(s) each, clock {} kHz\n",
             cap.spm_version >> 24, cap.spm_version & 0xffffff, cap.num_xcp, cap.num_xcc,
             cap.gpu_counter_freq_khz);
  const auto start = Clock::now();
  auto cap_result = rvgl::demo::capture_spm(*client, o);
  if (!cap_result) {
    const int status = cap_result.code() == -EPROTO ? 1 : 2;
    throw Failure{status,
                  fmt::format("spm: {} ({})", cap_result.error().message, cap_result.code())};
  }
  const rvgl::demo::SpmCapture &r = *cap_result;
  fmt::print("layout   : {} lines per sample, destinations of {} bytes ({} per XCC)\n",
             rvgl::spm::lines_per_sample(r.layout), r.dest_bytes, r.dest_bytes / r.layout.num_xcc);
  if (!r.info.counters.empty())
    fmt::print("counters : {} per sample on {}, named {} .. {}\n", r.info.counters.size(),
               r.info.device, r.info.counters.front().name, r.info.counters.back().name);
  int bad = 0;
  for (size_t i = 0; i < r.buffers.size(); ++i) {
    const auto &b = r.buffers[i];
    const bool ok = b.decoded_bytes == b.bytes_copied;
    bad += !ok;
    fmt::print("buffer {:<3}: {} bytes copied, {} decoded ({} samples){}{}\n", i, b.bytes_copied,
               b.decoded_bytes, b.samples, b.has_data_loss ? ", DATA LOSS" : "",
               ok ? "" : " MISMATCH");
  }
  auto check = [&](bool ok, const std::string &what) {
    fmt::print("check    : {:<58} {}\n", what, ok ? "ok" : "MISMATCH");
    bad += !ok;
  };
  check(r.stats.samples > 0, fmt::format("samples recorded ({})", r.stats.samples));
  check(r.stats.timestamp_regressions == 0, "timestamps increase on every XCC");
  check(client->session().shared_page().async_error() == 0, "no asynchronous errors reported");
  fmt::print("files    : {}\n           {}\n", r.csv_path, r.trace_path);
  if (!r.recording_path.empty())
    fmt::print("           {} (rvgl-spm {} --png spm.png --summary)\n", r.recording_path,
               r.recording_path);
  const double total = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  fmt::print("result   : {} — {} buffers, {} slices with data loss, {:.1f} ms\n",
             bad ? "FAIL" : "PASS", r.buffers.size(), r.stats.slices_with_loss, total);
  return bad ? 1 : 0;
}

}  // namespace

int main(int argc, char **argv) {
  CLI::App app{"rvgl-demo: a compute workload through a ROCM context on a vtest server"};
  std::string socket;
  uint64_t kib = 1024;
  app.add_option("-s,--socket", socket, "the vtest server's socket")->required();
  app.add_option("--size-kib", kib, "bytes copied, in KiB (multiple of 4, at most 65536)")
      ->check(CLI::Range(4, 65536));
  app.require_subcommand(0, 1);

  rvgl::demo::SpmCaptureOptions spm;
  uint64_t buffer_kib = spm.buffer_bytes / 1024;
  bool no_recording = false;
  CLI::App *spm_cmd = app.add_subcommand(
      "spm", "record SPM samples into guest buffers; write CSV, trace JSON and a recording");
  spm_cmd->add_option("-n,--buffers", spm.buffers, "destination buffers to record")
      ->check(CLI::Range(1, 4096));
  spm_cmd->add_option("--buffer-kib", buffer_kib, "size of each buffer, in KiB")
      ->check(CLI::Range(1, 262144));
  spm_cmd->add_option("--fill-timeout-ms", spm.fill_timeout_ms,
                      "how long the kernel may wait for a buffer to fill");
  spm_cmd->add_option("--xcp", spm.xcp, "SPM partition");
  spm_cmd->add_option("--counters", spm.counter_selection,
                      "counters to export: indices, names or 'all' (default: the first 8)");
  spm_cmd
      ->add_option("--counter-names", spm.counter_names_file,
                   "names for the counters: lines 'INDEX NAME [UNIT]' (docs/spm.md)")
      ->check(CLI::ExistingFile);
  spm_cmd->add_option("-o,--out-dir", spm.out_dir, "where the files go")
      ->required()
      ->check(CLI::ExistingDirectory);
  spm_cmd->add_flag("--no-recording", no_recording, "do not write spm-recording.bin");
  CLI11_PARSE(app, argc, argv);
  try {
    if (*spm_cmd) {
      spm.buffer_bytes = buffer_kib * 1024;
      spm.write_recording = !no_recording;
      return run_spm(socket, spm);
    }
    if (kib % 4) {
      fmt::print(stderr, "rvgl-demo: --size-kib must be a multiple of 4\n");
      return 2;
    }
    return run(socket, kib * 1024);
  } catch (const Failure &f) {
    fmt::print(stderr, "rvgl-demo: {}\nresult   : FAIL\n", f.what);
    return f.status;
  }
}
