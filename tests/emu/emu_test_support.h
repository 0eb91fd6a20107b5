// Helpers for the emulator tests: raw ioctl wrappers (so tests see exactly what the kernel
// interface returns), packet encoders, and knob guards.
//
// Packet encodings follow the public definitions: PM4 type 3 from the kernel's nvd.h/soc15d.h,
// SDMA from sdma_v6_0_0_pkt_open.h (the SDMA 4.x layouts are the same for these packets).
#pragma once

#include <amdgpu_drm.h>
#include <drm.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "amdgpu/uapi/amdgpu_drm_ext.h"
#include "rvgl_emu.h"

namespace rvgl::emu_test {

inline int xioctl(int fd, unsigned long req, void *arg) {
  const int r = ioctl(fd, req, arg);
  return r < 0 ? -errno : r;
}

class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() { reset(); }
  Fd(Fd &&o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  Fd &operator=(Fd &&o) noexcept {
    reset();
    fd_ = o.fd_;
    o.fd_ = -1;
    return *this;
  }
  int get() const { return fd_; }
  void reset() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

inline Fd open_render(int index = 0) {
  const std::string path = "/dev/dri/renderD" + std::to_string(128 + index);
  return Fd(open(path.c_str(), O_RDWR | O_CLOEXEC));
}

// Waits for a fork child: its exit code (the child's _exit says which of its checks failed),
// -1 when it did not exit normally.
inline int child_exit_code(pid_t pid) {
  int status = 0;
  if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

inline uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}
inline uint64_t abs_timeout_ms(uint64_t ms) {
  return now_ns() + ms * 1000000ull;
}

// Sets a knob for one scope and puts back the given value afterwards.
class Knob {
 public:
  Knob(const char *name, const std::string &value, std::string restore)
      : name_(name), restore_(std::move(restore)) {
    rc_ = rvgl_emu_set_knob(name, value.c_str());
  }
  ~Knob() { rvgl_emu_set_knob(name_, restore_.c_str()); }
  int rc() const { return rc_; }

 private:
  const char *name_;
  std::string restore_;
  int rc_;
};

// The profile the process started with (meson runs the suite once per profile).
inline std::string default_profile() {
  const char *p = std::getenv("RVGL_EMU_PROFILE");
  return p ? p : "gfx1100";
}

inline rvgl_emu_counters counters() {
  rvgl_emu_counters c{};
  rvgl_emu_get_counters(&c, sizeof(c));
  return c;
}

// ---- raw amdgpu ioctls ----

inline int gem_create(int fd, uint64_t size, uint64_t domains, uint64_t flags, uint32_t *handle) {
  drm_amdgpu_gem_create a{};
  a.in.bo_size = size;
  a.in.alignment = 4096;
  a.in.domains = domains;
  a.in.domain_flags = flags;
  const int r = xioctl(fd, DRM_IOCTL_AMDGPU_GEM_CREATE, &a);
  if (r == 0) *handle = a.out.handle;
  return r;
}

inline int gem_close(int fd, uint32_t handle) {
  drm_gem_close c{};
  c.handle = handle;
  return xioctl(fd, DRM_IOCTL_GEM_CLOSE, &c);
}

inline int gem_mmap_offset(int fd, uint32_t handle, uint64_t *off) {
  drm_amdgpu_gem_mmap m{};
  m.in.handle = handle;
  const int r = xioctl(fd, DRM_IOCTL_AMDGPU_GEM_MMAP, &m);
  if (r == 0) *off = m.out.addr_ptr;
  return r;
}

inline void *gem_cpu_map(int fd, uint32_t handle, size_t size) {
  uint64_t off;
  if (gem_mmap_offset(fd, handle, &off)) return nullptr;
  void *p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, static_cast<off_t>(off));
  return p == MAP_FAILED ? nullptr : p;
}

inline int gem_va(int fd, uint32_t op, uint32_t handle, uint64_t va, uint64_t offset, uint64_t size,
                  uint32_t flags = AMDGPU_VM_PAGE_READABLE | AMDGPU_VM_PAGE_WRITEABLE |
                                   AMDGPU_VM_PAGE_EXECUTABLE) {
  drm_amdgpu_gem_va a{};
  a.handle = handle;
  a.operation = op;
  a.flags = flags;
  a.va_address = va;
  a.offset_in_bo = offset;
  a.map_size = size;
  return xioctl(fd, DRM_IOCTL_AMDGPU_GEM_VA, &a);
}

inline int gem_userptr(int fd, void *ptr, uint64_t size, uint32_t flags, uint32_t *handle) {
  drm_amdgpu_gem_userptr a{};
  a.addr = reinterpret_cast<uintptr_t>(ptr);
  a.size = size;
  a.flags = flags;
  const int r = xioctl(fd, DRM_IOCTL_AMDGPU_GEM_USERPTR, &a);
  if (r == 0) *handle = a.handle;
  return r;
}

inline int ctx_create(int fd, uint32_t *ctx) {
  drm_amdgpu_ctx a{};
  a.in.op = AMDGPU_CTX_OP_ALLOC_CTX;
  a.in.priority = AMDGPU_CTX_PRIORITY_NORMAL;
  const int r = xioctl(fd, DRM_IOCTL_AMDGPU_CTX, &a);
  if (r == 0) *ctx = a.out.alloc.ctx_id;
  return r;
}

inline int ctx_free(int fd, uint32_t ctx) {
  drm_amdgpu_ctx a{};
  a.in.op = AMDGPU_CTX_OP_FREE_CTX;
  a.in.ctx_id = ctx;
  return xioctl(fd, DRM_IOCTL_AMDGPU_CTX, &a);
}

// AMDGPU_CTX_OP_QUERY_STATE (v1): the reset status since the context's previous v1 query.
inline uint32_t ctx_state1(int fd, uint32_t ctx) {
  drm_amdgpu_ctx a{};
  a.in.op = AMDGPU_CTX_OP_QUERY_STATE;
  a.in.ctx_id = ctx;
  REQUIRE(xioctl(fd, DRM_IOCTL_AMDGPU_CTX, &a) == 0);
  return a.out.state.reset_status;
}

inline uint64_t ctx_state2(int fd, uint32_t ctx) {
  drm_amdgpu_ctx a{};
  a.in.op = AMDGPU_CTX_OP_QUERY_STATE2;
  a.in.ctx_id = ctx;
  if (xioctl(fd, DRM_IOCTL_AMDGPU_CTX, &a)) return ~0ull;
  return a.out.state.flags;
}

inline int query_info(int fd, uint32_t query, void *out, uint32_t size, uint32_t ip = 0) {
  drm_amdgpu_info a{};
  a.return_pointer = reinterpret_cast<uintptr_t>(out);
  a.return_size = size;
  a.query = query;
  a.query_hw_ip.type = ip;
  return xioctl(fd, DRM_IOCTL_AMDGPU_INFO, &a);
}

inline rvgl_drm_amdgpu_info_gpuvm_fault vm_fault(int fd) {
  rvgl_drm_amdgpu_info_gpuvm_fault f{};
  query_info(fd, RVGL_AMDGPU_INFO_GPUVM_FAULT, &f, sizeof(f));
  return f;
}

struct CsExtra {
  std::vector<drm_amdgpu_cs_chunk> chunks;
};

// Submits one IB (plus extra chunks) and returns the sequence number in *seq.
inline int submit(int fd, uint32_t ctx, uint32_t ip, uint32_t ring, uint64_t ib_va,
                  uint32_t ib_bytes, uint64_t *seq,
                  const std::vector<drm_amdgpu_cs_chunk> &extra = {}, uint32_t bo_list = 0) {
  drm_amdgpu_cs_chunk_ib ib{};
  ib.va_start = ib_va;
  ib.ib_bytes = ib_bytes;
  ib.ip_type = ip;
  ib.ring = ring;
  std::vector<drm_amdgpu_cs_chunk> chunks;
  chunks.push_back({AMDGPU_CHUNK_ID_IB, sizeof(ib) / 4, reinterpret_cast<uintptr_t>(&ib)});
  chunks.insert(chunks.end(), extra.begin(), extra.end());
  std::vector<uint64_t> ptrs;
  for (auto &c : chunks)
    ptrs.push_back(reinterpret_cast<uintptr_t>(&c));
  drm_amdgpu_cs cs{};
  cs.in.ctx_id = ctx;
  cs.in.bo_list_handle = bo_list;
  cs.in.num_chunks = static_cast<uint32_t>(ptrs.size());
  cs.in.chunks = reinterpret_cast<uintptr_t>(ptrs.data());
  const int r = xioctl(fd, DRM_IOCTL_AMDGPU_CS, &cs);
  if (r == 0 && seq) *seq = cs.out.handle;
  return r;
}

// WAIT_CS: 0 when done, the job's error when it failed, 1 when still busy at the deadline.
inline int wait_cs(int fd, uint32_t ctx, uint32_t ip, uint32_t ring, uint64_t seq,
                   uint64_t abs_timeout_ns) {
  drm_amdgpu_wait_cs w{};
  w.in.handle = seq;
  w.in.ip_type = ip;
  w.in.ring = ring;
  w.in.ctx_id = ctx;
  w.in.timeout = abs_timeout_ns;
  const int r = xioctl(fd, DRM_IOCTL_AMDGPU_WAIT_CS, &w);
  if (r) return r;
  return w.out.status ? 1 : 0;
}

// WAIT_FENCES on one fence: the ioctl's result, and what it answered in *out.
inline int wait_fence(int fd, drm_amdgpu_fence fence, bool wait_all, uint64_t abs_timeout_ns,
                      drm_amdgpu_wait_fences_out *out) {
  drm_amdgpu_wait_fences w{};
  w.in.fences = reinterpret_cast<uintptr_t>(&fence);
  w.in.fence_count = 1;
  w.in.wait_all = wait_all;
  w.in.timeout_ns = abs_timeout_ns;
  const int r = xioctl(fd, DRM_IOCTL_AMDGPU_WAIT_FENCES, &w);
  *out = w.out;
  return r;
}

// A GPU buffer in one file: created, CPU-mapped and mapped at `va` in that file's VM.
struct GpuBuffer {
  int fd = -1;
  uint32_t handle = 0;
  uint64_t va = 0, size = 0;
  void *cpu = nullptr;
  int create(int f, uint64_t bytes, uint64_t at_va, uint64_t domain = AMDGPU_GEM_DOMAIN_GTT) {
    fd = f;
    size = bytes;
    va = at_va;
    if (int r = gem_create(fd, bytes, domain, 0, &handle)) return r;
    cpu = gem_cpu_map(fd, handle, bytes);
    if (!cpu) return -ENOMEM;
    return gem_va(fd, AMDGPU_VA_OP_MAP, handle, va, 0, bytes);
  }
  ~GpuBuffer() {
    if (cpu) munmap(cpu, size);
    if (handle) gem_close(fd, handle);
  }
  uint32_t *u32() const { return static_cast<uint32_t *>(cpu); }
  uint8_t *u8() const { return static_cast<uint8_t *>(cpu); }
};

// ---- packet encoders ----

namespace sdma {
inline uint32_t header(uint32_t op, uint32_t sub = 0, uint32_t extra = 0) {
  return op | (sub << 8) | (extra << 16);
}
inline void copy_linear(std::vector<uint32_t> &ib, uint64_t dst, uint64_t src, uint32_t bytes) {
  ib.insert(ib.end(), {header(1), bytes - 1, 0, uint32_t(src), uint32_t(src >> 32), uint32_t(dst),
                       uint32_t(dst >> 32)});
}
inline void fence(std::vector<uint32_t> &ib, uint64_t addr, uint32_t value) {
  ib.insert(ib.end(), {header(5), uint32_t(addr), uint32_t(addr >> 32), value});
}
inline void write(std::vector<uint32_t> &ib, uint64_t dst, const std::vector<uint32_t> &data) {
  ib.insert(ib.end(), {header(2), uint32_t(dst), uint32_t(dst >> 32), uint32_t(data.size() - 1)});
  ib.insert(ib.end(), data.begin(), data.end());
}
inline void const_fill(std::vector<uint32_t> &ib, uint64_t dst, uint32_t value, uint32_t bytes) {
  // FILLSIZE (bits 31:30) 2: dword elements.
  ib.insert(ib.end(),
            {header(11) | (2u << 30), uint32_t(dst), uint32_t(dst >> 32), value, bytes - 1});
}
inline void poll_mem_equal(std::vector<uint32_t> &ib, uint64_t addr, uint32_t value) {
  // FUNC 3 (equal) in 30:28, MEM_POLL bit 31; retry count 0xfff = forever.
  ib.insert(ib.end(), {header(8) | (3u << 28) | (1u << 31), uint32_t(addr), uint32_t(addr >> 32),
                       value, 0xffffffffu, 10u | (0xfffu << 16)});
}
inline void trap(std::vector<uint32_t> &ib) {
  ib.insert(ib.end(), {header(6), 0});
}
inline void nop(std::vector<uint32_t> &ib) {
  ib.push_back(header(0));
}
}  // namespace sdma

namespace pm4 {
inline uint32_t packet3(uint32_t op, uint32_t body_dwords) {
  return (3u << 30) | ((op & 0xff) << 8) | (((body_dwords - 1) & 0x3fff) << 16);
}
inline void nop1(std::vector<uint32_t> &ib) {
  ib.push_back((3u << 30) | (0x10u << 8) | (0x3fffu << 16));
}
inline void write_data(std::vector<uint32_t> &ib, uint64_t addr,
                       const std::vector<uint32_t> &data) {
  ib.push_back(packet3(0x37, 3 + static_cast<uint32_t>(data.size())));
  ib.insert(ib.end(), {(5u << 8) | (1u << 20), uint32_t(addr), uint32_t(addr >> 32)});
  ib.insert(ib.end(), data.begin(), data.end());
}
// RELEASE_MEM (GFX9+, 7 body dwords): end-of-pipe event, then DATA_SEL 2 writes 64 bits.
inline void release_mem64(std::vector<uint32_t> &ib, uint64_t addr, uint64_t value) {
  ib.insert(ib.end(), {packet3(0x49, 7), 0x14u | (5u << 8), 2u << 29, uint32_t(addr),
                       uint32_t(addr >> 32), uint32_t(value), uint32_t(value >> 32), 0});
}
inline void release_mem32(std::vector<uint32_t> &ib, uint64_t addr, uint32_t value) {
  ib.insert(ib.end(), {packet3(0x49, 7), 0x14u | (5u << 8), 1u << 29, uint32_t(addr),
                       uint32_t(addr >> 32), value, 0, 0});
}
inline void dma_data_copy(std::vector<uint32_t> &ib, uint64_t dst, uint64_t src, uint32_t bytes) {
  ib.insert(ib.end(), {packet3(0x50, 6), 0, uint32_t(src), uint32_t(src >> 32), uint32_t(dst),
                       uint32_t(dst >> 32), bytes});
}
inline void indirect_buffer(std::vector<uint32_t> &ib, uint64_t va, uint32_t dwords, bool chain) {
  ib.insert(ib.end(), {packet3(0x3f, 3), uint32_t(va), uint32_t(va >> 32) & 0xffff,
                       dwords | (1u << 23) | (chain ? 1u << 20 : 0)});
}
inline void event_write(std::vector<uint32_t> &ib) {
  ib.insert(ib.end(), {packet3(0x46, 1), 0x7u | (4u << 8)});
}
}  // namespace pm4

// Copies an IB into a buffer's CPU mapping at a byte offset; returns its GPU address.
inline uint64_t place_ib(const GpuBuffer &b, uint64_t offset, const std::vector<uint32_t> &ib) {
  std::memcpy(b.u8() + offset, ib.data(), ib.size() * 4);
  return b.va + offset;
}

// Polls fn() until true or ms elapse.
template <typename Fn>
bool eventually(Fn fn, int ms = 5000) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (std::chrono::steady_clock::now() < end) {
    if (fn()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return fn();
}

}  // namespace rvgl::emu_test
