// Acceptance: the profiler ioctl of seed 000. GET_VER; ACQUIRE exclusive across files and
// processes; SET_DEST_BUF returning when a buffer fills or the timeout runs out, with the time
// left, per-XCC headers, bytes_copied and has_data_loss; a NULL destination stops streaming.

#include <catch2/catch.hpp>

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "emu_test_support.h"
#include "unmapped_memory.h"

using namespace rvgl::emu_test;

namespace {

constexpr uint32_t kLine = 32;
constexpr uint32_t kHeader = sizeof(rvgl_drm_amdgpu_spm_buffer_header);

int profiler(int fd, rvgl_drm_amdgpu_profiler_args &a) {
  return xioctl(fd, RVGL_DRM_IOCTL_AMDGPU_PROFILER, &a);
}

int spm_op(int fd, uint32_t op) {
  rvgl_drm_amdgpu_profiler_args a{};
  a.op = RVGL_AMDGPU_PROFILER_OP_SPM;
  a.data.spm.op = op;
  return profiler(fd, a);
}

struct DestResult {
  int rc;
  uint32_t bytes_copied, has_data_loss, timeout_left;
  double elapsed_ms;
};

DestResult set_dest(int fd, void *buf, uint32_t size, uint32_t timeout_ms) {
  rvgl_drm_amdgpu_profiler_args a{};
  a.op = RVGL_AMDGPU_PROFILER_OP_SPM;
  a.data.spm.op = RVGL_AMDGPU_SPM_OP_SET_DEST_BUF;
  a.data.spm.dest_buf = reinterpret_cast<uintptr_t>(buf);
  a.data.spm.buf_size = size;
  a.data.spm.timeout = timeout_ms;
  const uint64_t t0 = now_ns();
  const int rc = profiler(fd, a);
  return {rc, a.data.spm.bytes_copied, a.data.spm.has_data_loss, a.data.spm.timeout,
          static_cast<double>(now_ns() - t0) / 1e6};
}

rvgl_drm_amdgpu_spm_buffer_header header_at(const uint8_t *buf, size_t off) {
  rvgl_drm_amdgpu_spm_buffer_header h;
  std::memcpy(&h, buf + off, sizeof(h));
  return h;
}

rvgl_drm_amdgpu_spm_buffer_header header_at(const std::vector<uint8_t> &buf, size_t off) {
  return header_at(buf.data(), off);
}

// Lines per sample on a one-XCC node (Mesa ac_spm layout: 2 global lines + one per shader
// engine), from what the node reports.
uint32_t lines_per_sample(int fd) {
  rvgl_drm_amdgpu_info_device di{};
  REQUIRE(query_info(fd, AMDGPU_INFO_DEV_INFO, &di, sizeof(di)) == 0);
  return 2 + di.base.num_shader_engines;
}

std::string xccs_default() {
  return "0";
}

}  // namespace

TEST_CASE("GET_VER reports the profiler UAPI version", "[profiler][acceptance]") {
  Fd fd = open_render();
  rvgl_drm_amdgpu_profiler_args a{};
  a.op = RVGL_AMDGPU_PROFILER_OP_GET_VER;
  REQUIRE(profiler(fd.get(), a) == 0);
  CHECK(RVGL_AMDGPU_PROFILER_VERSION_MAJOR(a.data.version) == 1);
  CHECK(RVGL_AMDGPU_PROFILER_VERSION_MINOR(a.data.version) == 0);
  a = {};
  a.op = RVGL_AMDGPU_PROFILER_OP_GET_VER;
  a.data.version = 5;  // input must be zero
  CHECK(profiler(fd.get(), a) == -EINVAL);
  a = {};
  a.op = RVGL_AMDGPU_PROFILER_OP_GET_VER;
  a.pad = 1;
  CHECK(profiler(fd.get(), a) == -EINVAL);
  a = {};
  a.op = 99;
  CHECK(profiler(fd.get(), a) == -EINVAL);
}

TEST_CASE("SPM ACQUIRE is exclusive across files and processes", "[profiler][acceptance]") {
  Fd a = open_render(), b = open_render();
  REQUIRE(spm_op(a.get(), RVGL_AMDGPU_SPM_OP_ACQUIRE) == 0);
  CHECK(spm_op(a.get(), RVGL_AMDGPU_SPM_OP_ACQUIRE) == -EBUSY);
  CHECK(spm_op(b.get(), RVGL_AMDGPU_SPM_OP_ACQUIRE) == -EBUSY);
  CHECK(spm_op(b.get(), RVGL_AMDGPU_SPM_OP_RELEASE) == -EINVAL);

  // Another process: its own open of the node, its own ACQUIRE.
  auto child_acquire = [] {
    const pid_t pid = fork();
    if (pid == 0) {
      const int fd = open("/dev/dri/renderD128", O_RDWR | O_CLOEXEC);
      const int r = spm_op(fd, RVGL_AMDGPU_SPM_OP_ACQUIRE);
      if (r == 0) spm_op(fd, RVGL_AMDGPU_SPM_OP_RELEASE);
      _exit(r == 0 ? 0 : r == -EBUSY ? 1 : 2);
    }
    return child_exit_code(pid);
  };
  CHECK(child_acquire() == 1);  // EBUSY while this process holds it
  REQUIRE(spm_op(a.get(), RVGL_AMDGPU_SPM_OP_RELEASE) == 0);
  CHECK(spm_op(a.get(), RVGL_AMDGPU_SPM_OP_RELEASE) == -EINVAL);
  CHECK(child_acquire() == 0);  // free again: the child gets and releases it
  REQUIRE(spm_op(b.get(), RVGL_AMDGPU_SPM_OP_ACQUIRE) == 0);
  b.reset();  // closing the owner releases it
  CHECK(spm_op(a.get(), RVGL_AMDGPU_SPM_OP_ACQUIRE) == 0);
  CHECK(spm_op(a.get(), RVGL_AMDGPU_SPM_OP_RELEASE) == 0);
}

TEST_CASE("SET_DEST_BUF drains the sample stream into per-XCC slices", "[profiler][acceptance]") {
  Knob xccs("RVGL_EMU_XCCS", "1", xccs_default());
  REQUIRE(xccs.rc() == 0);
  Knob rate("RVGL_EMU_SPM_RATE_HZ", "20000", "1000");
  Fd fd = open_render();
  const int f = fd.get();
  constexpr uint32_t kSize = 64 * 1024;
  std::vector<uint8_t> buf1(kSize), buf2(kSize), buf3(kSize), buf4(kSize);
  const uint32_t cap = kSize - kHeader;

  CHECK(set_dest(f, buf1.data(), kSize, 0).rc == -EINVAL);  // not acquired
  REQUIRE(spm_op(f, RVGL_AMDGPU_SPM_OP_ACQUIRE) == 0);

  SECTION("a timeout returns as soon as the previous buffer is full") {
    const DestResult first = set_dest(f, buf1.data(), kSize, 0);
    REQUIRE(first.rc == 0);
    CHECK(first.bytes_copied == 0);  // there was no previous buffer
    const DestResult second = set_dest(f, buf2.data(), kSize, 5000);
    REQUIRE(second.rc == 0);
    CHECK(second.bytes_copied == cap);
    CHECK(second.has_data_loss == 0);
    CHECK(second.timeout_left > 0);
    CHECK(second.timeout_left < 5000);
    CHECK(second.elapsed_ms < 4000);
    const auto h = header_at(buf1, 0);
    CHECK(h.version == ((1u << 24) | 0u));
    CHECK(h.bytes_copied == cap);
    CHECK(h.has_data_loss == 0);
    // Samples: global line 0 of each starts with a 64-bit timestamp that only grows.
    const uint32_t lps = lines_per_sample(f);
    uint64_t last = 0;
    size_t samples = 0;
    for (size_t line = 0; (line + 1) * kLine <= cap; line += lps) {
      uint64_t ts;
      std::memcpy(&ts, buf1.data() + kHeader + line * kLine, 8);
      CHECK(ts > last);
      last = ts;
      ++samples;
    }
    CHECK(samples >= cap / (lps * kLine));
    // The next buffer continues the stream where this one stopped.
    const DestResult stop = set_dest(f, nullptr, 0, 0);
    REQUIRE(stop.rc == 0);
    CHECK(header_at(buf2, 0).bytes_copied == stop.bytes_copied);
  }

  SECTION("when time runs out the partial buffer is returned, with no time left") {
    Knob slow("RVGL_EMU_SPM_RATE_HZ", "40", "20000");
    REQUIRE(set_dest(f, buf1.data(), kSize, 0).rc == 0);
    const DestResult r = set_dest(f, buf2.data(), kSize, 120);
    REQUIRE(r.rc == 0);
    CHECK(r.timeout_left == 0);
    CHECK(r.elapsed_ms >= 100);
    CHECK(r.bytes_copied > 0);
    CHECK(r.bytes_copied < cap);
    CHECK(r.bytes_copied % kLine == 0);
    CHECK(header_at(buf1, 0).bytes_copied == r.bytes_copied);
    CHECK(set_dest(f, nullptr, 0, 0).rc == 0);
  }

  SECTION("nobody draining in time loses data, and the retired buffer says so") {
    Knob ring("RVGL_EMU_SPM_RING_KB", "1", "4096");
    REQUIRE(set_dest(f, buf1.data(), 4096, 0).rc == 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(60));
    const DestResult r = set_dest(f, buf2.data(), kSize, 0);
    REQUIRE(r.rc == 0);
    CHECK(r.has_data_loss == 1);
    CHECK(r.bytes_copied == 4096 - kHeader);
    CHECK(header_at(buf1, 0).has_data_loss == 1);
    // A buffer drained in time has no loss.
    const DestResult next = set_dest(f, buf3.data(), kSize, 0);
    REQUIRE(next.rc == 0);
    CHECK(header_at(buf2, 0).has_data_loss == 0);
    CHECK(set_dest(f, nullptr, 0, 0).rc == 0);
  }

  SECTION("a NULL destination stops the stream") {
    REQUIRE(set_dest(f, buf1.data(), kSize, 0).rc == 0);
    const DestResult stop = set_dest(f, nullptr, 0, 0);
    REQUIRE(stop.rc == 0);
    CHECK(header_at(buf1, 0).bytes_copied == stop.bytes_copied);
    std::memset(buf1.data(), 0xee, kSize);
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    // Nothing more lands anywhere; a restart begins a fresh stream with an empty ring.
    CHECK(buf1[kHeader + 100] == 0xee);
    const auto restart = std::chrono::steady_clock::now();
    REQUIRE(set_dest(f, buf3.data(), kSize, 0).rc == 0);
    const DestResult after = set_dest(f, nullptr, 0, 0);
    const auto streamed = std::chrono::steady_clock::now() - restart;
    REQUIRE(after.rc == 0);
    CHECK(after.has_data_loss == 0);
    // Only what the restarted stream made (20000 samples/s), not the 30 ms spent stopped: bounded
    // by the time it really ran, however long a loaded machine took between the two calls.
    const uint64_t sample = uint64_t{lines_per_sample(f)} * 32;
    const auto ran_us = std::chrono::duration_cast<std::chrono::microseconds>(streamed).count();
    CHECK(after.bytes_copied <= (static_cast<uint64_t>(ran_us) * 20000 / 1000000 + 2) * sample);
    CHECK(buf1[kHeader + 100] == 0xee);
  }

  SECTION("bad arguments") {
    CHECK(set_dest(f, buf1.data(), 32, 0).rc == -EINVAL);  // no room after the header
    rvgl_drm_amdgpu_profiler_args a{};
    a.op = RVGL_AMDGPU_PROFILER_OP_SPM;
    a.data.spm.op = RVGL_AMDGPU_SPM_OP_SET_DEST_BUF;
    a.data.spm.dest_buf = reinterpret_cast<uintptr_t>(buf1.data());
    a.data.spm.buf_size = kSize;
    a.data.spm.reserved[3] = 1;
    CHECK(profiler(f, a) == -EINVAL);
    // Where the new buffer lies is not checked (amdgpu_set_dest_buffer()): the copies into it
    // fail later, and retiring it fails on its header, which keeps it in place.
    CHECK(set_dest(f, never_mapped(), kSize, 0).rc == 0);
    CHECK(set_dest(f, buf1.data(), kSize, 0).rc == -EFAULT);
    CHECK(set_dest(f, nullptr, 0, 0).rc == -EFAULT);
    CHECK(spm_op(f, 77) == -EINVAL);
  }
  CHECK(spm_op(f, RVGL_AMDGPU_SPM_OP_RELEASE) == 0);
}

namespace {

// The SPM of a node with three XCCs, acquired, streaming 20000 samples a second.
struct ThreeXccSpm {
  Knob xccs{"RVGL_EMU_XCCS", "3", xccs_default()};
  Knob rate{"RVGL_EMU_SPM_RATE_HZ", "20000", "1000"};
  Fd fd;
  ThreeXccSpm() {
    REQUIRE(xccs.rc() == 0);
    fd = open_render();
    REQUIRE(spm_op(fd.get(), RVGL_AMDGPU_SPM_OP_ACQUIRE) == 0);
  }
};

}  // namespace

TEST_CASE("SET_DEST_BUF splits the buffer evenly across the XCP's XCCs", "[profiler]") {
  ThreeXccSpm spm;
  const int f = spm.fd.get();
  constexpr uint32_t kSize = 3 * 8192 + 100;
  constexpr uint32_t kSlice = (kSize / 3) & ~31u;  // an even third, rounded down to 32 bytes
  std::vector<uint8_t> a(kSize), b(kSize);
  REQUIRE(set_dest(f, a.data(), kSize, 0).rc == 0);
  const DestResult r = set_dest(f, b.data(), kSize, 5000);
  REQUIRE(r.rc == 0);
  uint32_t sum = 0;
  for (int x = 0; x < 3; ++x) {
    const auto h = header_at(a, x * kSlice);
    CHECK(h.version == (1u << 24));
    CHECK(h.bytes_copied <= kSlice - kHeader);
    sum += h.bytes_copied;
  }
  CHECK(sum == r.bytes_copied);
  CHECK(r.bytes_copied >= kSlice - kHeader);  // at least one slice filled
  CHECK(set_dest(f, nullptr, 0, 0).rc == 0);
  CHECK(spm_op(f, RVGL_AMDGPU_SPM_OP_RELEASE) == 0);
}

TEST_CASE("SET_DEST_BUF stops at the XCC whose retired header it cannot write", "[profiler]") {
  // amdgpu_set_dest_buffer() moves the stream XCC by XCC; spm_update_dest_info() writes the header
  // of the slice it retires before it takes the new one, and a header it cannot write ends the
  // loop with EFAULT: the XCCs before stream into the new buffer, the rest into the old.
  ThreeXccSpm spm;
  const int f = spm.fd.get();
  const auto page = static_cast<uint32_t>(sysconf(_SC_PAGESIZE));
  const uint32_t slice = 2 * page, size = 3 * slice;
  void *mem = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(mem != MAP_FAILED);
  auto *old_buf = static_cast<uint8_t *>(mem);
  std::vector<uint8_t> new_buf(size), last(size);

  REQUIRE(set_dest(f, old_buf, size, 0).rc == 0);
  REQUIRE(mprotect(old_buf + slice, page, PROT_READ) == 0);   // XCC 1's header, and its samples
  std::this_thread::sleep_for(std::chrono::milliseconds(5));  // samples XCC 1 cannot write
  CHECK(set_dest(f, new_buf.data(), size, 0).rc == -EFAULT);
  CHECK(header_at(old_buf, 0).version == (1u << 24));  // XCC 0 retired its slice
  CHECK(header_at(old_buf, 2 * slice).version == 0);   // XCC 2 never reached
  std::this_thread::sleep_for(std::chrono::milliseconds(5));

  REQUIRE(mprotect(old_buf + slice, page, PROT_READ | PROT_WRITE) == 0);
  const DestResult r = set_dest(f, last.data(), size, 0);
  REQUIRE(r.rc == 0);
  const auto x0 = header_at(new_buf, 0), x1 = header_at(old_buf, slice),
             x2 = header_at(old_buf, 2 * slice);
  CHECK(x0.version == (1u << 24));
  CHECK(x0.bytes_copied > 0);  // XCC 0 streamed into the new buffer
  CHECK(x0.has_data_loss == 0);
  CHECK(x1.version == (1u << 24));
  CHECK(x1.has_data_loss == 1);  // its samples while the page was read-only are lost
  CHECK(x2.version == (1u << 24));
  CHECK(x2.bytes_copied > 0);  // XCC 2 kept streaming into the old buffer
  CHECK(r.bytes_copied == x0.bytes_copied + x1.bytes_copied + x2.bytes_copied);
  CHECK(r.has_data_loss == 1);
  // The new buffer's slices for XCCs 1 and 2 were never taken.
  CHECK(std::all_of(new_buf.begin() + slice, new_buf.end(), [](uint8_t b) { return b == 0; }));
  CHECK(set_dest(f, nullptr, 0, 0).rc == 0);
  CHECK(spm_op(f, RVGL_AMDGPU_SPM_OP_RELEASE) == 0);
  munmap(mem, size);
}
