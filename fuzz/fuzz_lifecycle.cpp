// Harness 4, lifetimes (issue 14): the input is a script of resource lifetimes driven through our
// library in front of the real libvirglrenderer, as a VMM and its guest drive them: userptr blobs
// over guest RAM, BOs claimed as blobs, attach / detach / re-attach / unref, VA_MAP / VA_UNMAP /
// BO_FREE, and the SPM streaming into any of them (SET_DEST with short timeouts, RELEASE, context
// destroy while a SET_DEST is blocked).
//
// Checked after every step, so a violation is reported at the step that caused it:
// - guest RAM no live userptr resource covers was filled with a canary when it was released and
//   must still hold it: nothing of the host writes into pages the VMM took back;
// - a BO the guest has not freed maps (VA_MAP answers 0): no other owner closed its handle.
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <thread>
#include <vector>

#include "rocm_virgl_protocol.h"
#include "virgl_api.h"

namespace {

constexpr uint32_t kCapsetRocm = 8;
constexpr uint32_t kCtx = 1;
constexpr uint32_t kShmemRes = 1;
constexpr size_t kRamPages = 64;
constexpr size_t kPage = 4096;
constexpr uint8_t kCanary = 0xc3;
constexpr uint64_t kVaBase = 1ull << 32;  // inside every profile's guest VA range
constexpr uint32_t kSpmRing = 9;

struct Reader {
  const uint8_t *p;
  size_t n;
  bool empty() const { return n == 0; }
  uint8_t u8() {
    if (!n) return 0;
    --n;
    return *p++;
  }
};

void write_fence(void *, uint32_t) {}
void write_context_fence(void *, uint32_t, uint32_t, uint64_t) {}

[[noreturn]] void violation(const char *what, size_t detail) {
  std::fprintf(stderr, "fuzz-lifecycle: %s (%zu)\n", what, detail);
  std::abort();
}

uint8_t *ram;
virgl_renderer_callbacks cbs;

// One input's world: what the guest believes it has.
struct World {
  bool alive = false;
  uint8_t *shmem = nullptr;
  uint32_t seqno = 0;
  uint32_t slot = 0;
  uint64_t next_blob_id = 1;
  struct Res {
    bool userptr = false;
    bool attached = true;
    std::vector<size_t> pages;  // userptr: guest RAM pages it covers
    uint32_t bo = 0;            // claims: the BO
  };
  std::map<uint32_t, Res> res;            // res id -> what it is
  std::set<uint32_t> bos;                 // BOs not freed
  std::map<uint64_t, uint64_t> mappings;  // va -> size
  bool spm = false;
  bool released[kRamPages] = {};
};

World w;

// Sends one request; the response's result, or 1 when it is deferred / did not come.
template <class Req>
int32_t call(Req r, uint32_t cmd) {
  const uint32_t off = (w.slot++ % 64) * RVGL_MAX_RSP_SIZE;
  r.hdr = rvgl_req_hdr{cmd, sizeof(Req), ++w.seqno, off};
  virgl_renderer_submit_cmd(&r, static_cast<int>(kCtx), sizeof(Req) / 4);
  rvgl_rsp_hdr h;
  std::memcpy(&h, w.shmem + RVGL_RSP_AREA_OFFSET + off, sizeof(h));
  return h.seqno == w.seqno ? h.result : 1;
}

bool covered(size_t page) {
  for (const auto &[id, r] : w.res)
    if (r.userptr && r.attached)
      for (size_t p : r.pages)
        if (p == page) return true;
  return false;
}

// Pages no live userptr resource covers any more get the canary.
void release_uncovered() {
  for (size_t p = 0; p < kRamPages; ++p) {
    if (w.released[p] || covered(p)) continue;
    std::memset(ram + p * kPage, kCanary, kPage);
    w.released[p] = true;
  }
}

void check() {
  for (size_t p = 0; p < kRamPages; ++p) {
    if (!w.released[p]) continue;
    for (size_t i = 0; i < kPage; ++i)
      if (ram[p * kPage + i] != kCanary) violation("host wrote into released guest RAM", p);
  }
}

bool start() {
  if (virgl_renderer_context_create_with_flags(kCtx, kCapsetRocm, 4, "life")) return false;
  virgl_renderer_resource_create_blob_args a{};
  a.res_handle = kShmemRes;
  a.ctx_id = kCtx;
  a.blob_mem = VIRGL_RENDERER_BLOB_MEM_HOST3D;
  a.blob_flags = RVGL_BLOB_FLAG_USE_MAPPABLE;
  a.size = RVGL_SHMEM_SIZE;
  void *map = nullptr;
  uint64_t size = 0;
  if (virgl_renderer_resource_create_blob(&a) ||
      virgl_renderer_resource_map(kShmemRes, &map, &size) || !map) {
    virgl_renderer_context_destroy(kCtx);
    return false;
  }
  w.shmem = static_cast<uint8_t *>(map);
  w.alive = true;
  return true;
}

void stop() {
  if (!w.alive) return;
  virgl_renderer_resource_unmap(kShmemRes);
  for (auto &[id, r] : w.res)
    virgl_renderer_resource_unref(id);
  virgl_renderer_resource_unref(kShmemRes);
  virgl_renderer_context_destroy(kCtx);
  w.res.clear();
  w.bos.clear();
  w.mappings.clear();
  w.spm = false;
  w.alive = false;
  release_uncovered();
}

uint32_t pick_res(Reader &in) {
  return 2 + in.u8() % 8;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  // Guest RAM: shared memory, as a VMM's memfd-backed RAM is (alias and udmabuf paths need it).
  void *m =
      mmap(nullptr, kRamPages * kPage, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) abort();
  ram = static_cast<uint8_t *>(m);
  cbs.version = 3;
  cbs.write_fence = write_fence;
  cbs.write_context_fence = write_context_fence;
  static int cookie;
  if (virgl_renderer_init(&cookie, VIRGL_RENDERER_NO_VIRGL | VIRGL_RENDERER_THREAD_SYNC, &cbs))
    abort();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  Reader in{data, size};
  w = World();
  std::memset(ram, 0, kRamPages * kPage);
  if (!start()) return 0;
  while (!in.empty()) {
    const uint8_t op = in.u8() % 13;
    const uint32_t rid = pick_res(in);
    switch (op) {
      case 0: {  // a userptr blob over 1..4 runs of guest pages
        if (w.res.count(rid)) break;
        iovec iov[4];
        const uint32_t n = 1 + in.u8() % 4;
        World::Res r;
        r.userptr = true;
        uint64_t total = 0;
        for (uint32_t i = 0; i < n; ++i) {
          const size_t page = in.u8() % kRamPages;
          const size_t pages = std::min<size_t>(1 + in.u8() % 4, kRamPages - page);
          iov[i] = {ram + page * kPage, pages * kPage};
          total += pages * kPage;
          for (size_t p = page; p < page + pages; ++p)
            r.pages.push_back(p);
        }
        virgl_renderer_resource_create_blob_args a{};
        a.res_handle = rid;
        a.ctx_id = kCtx;
        a.blob_mem = VIRGL_RENDERER_BLOB_MEM_GUEST;
        a.blob_flags = RVGL_BLOB_FLAG_USERPTR;
        a.size = total;
        a.iovecs = iov;
        a.num_iovs = n;
        // The guest owns these pages again: they are no longer released.
        for (size_t p : r.pages)
          w.released[p] = false;
        if (!virgl_renderer_resource_create_blob(&a)) w.res[rid] = r;
        release_uncovered();
        break;
      }
      case 1: {  // a BO with a blob id, claimed as a HOST3D blob
        if (w.res.count(rid)) break;
        rvgl_req_bo_create q{};
        q.size = (1 + in.u8() % 4) * kPage;
        q.domain = RVGL_DOMAIN_GTT;
        q.blob_id = w.next_blob_id++;
        if (call(q, RVGL_CMD_BO_CREATE) != 0) break;
        rvgl_rsp_bo_create rsp;
        std::memcpy(&rsp, w.shmem + RVGL_RSP_AREA_OFFSET + ((w.slot - 1) % 64) * RVGL_MAX_RSP_SIZE,
                    sizeof(rsp));
        w.bos.insert(rsp.bo);
        virgl_renderer_resource_create_blob_args a{};
        a.res_handle = rid;
        a.ctx_id = kCtx;
        a.blob_mem = VIRGL_RENDERER_BLOB_MEM_HOST3D;
        a.blob_flags = RVGL_BLOB_FLAG_USE_MAPPABLE | RVGL_BLOB_FLAG_USE_SHAREABLE;
        a.blob_id = q.blob_id;
        a.size = q.size;
        if (!virgl_renderer_resource_create_blob(&a)) {
          World::Res r;
          r.bo = rsp.bo;
          w.res[rid] = r;
        }
        break;
      }
      case 2:  // unref
        if (!w.res.count(rid)) break;
        virgl_renderer_resource_unref(rid);
        w.res.erase(rid);
        release_uncovered();
        break;
      case 3:  // detach
        if (!w.res.count(rid)) break;
        virgl_renderer_ctx_detach_resource(static_cast<int>(kCtx), static_cast<int>(rid));
        w.res[rid].attached = false;
        release_uncovered();
        break;
      case 4:  // (re-)attach: a detached userptr stays gone, a BO comes back as itself
        if (!w.res.count(rid)) break;
        virgl_renderer_ctx_attach_resource(static_cast<int>(kCtx), static_cast<int>(rid));
        if (!w.res[rid].userptr) w.res[rid].attached = true;
        break;
      case 5: {  // VA_MAP a BO or a resource at one of 16 slots
        rvgl_req_va_map q{};
        const uint64_t va = kVaBase + (in.u8() % 16) * (1ull << 20);
        if (w.mappings.count(va)) break;
        if (in.u8() & 1 && !w.bos.empty()) {
          q.bo = *std::next(w.bos.begin(), in.u8() % w.bos.size());
        } else {
          q.res_id = rid;
        }
        q.va = va;
        q.size = kPage;
        q.flags = RVGL_VA_FLAG_READ | RVGL_VA_FLAG_WRITE;
        const int32_t r = call(q, RVGL_CMD_VA_MAP);
        if (q.bo && r != 0) violation("a live BO lost its kernel handle", q.bo);
        if (r == 0) w.mappings[va] = kPage;
        break;
      }
      case 6: {  // VA_UNMAP
        if (w.mappings.empty()) break;
        auto it = std::next(w.mappings.begin(), in.u8() % w.mappings.size());
        rvgl_req_va_unmap q{};
        q.va = it->first;
        q.size = it->second;
        call(q, RVGL_CMD_VA_UNMAP);
        w.mappings.erase(it);
        break;
      }
      case 7: {  // BO_FREE
        if (w.bos.empty()) break;
        auto it = std::next(w.bos.begin(), in.u8() % w.bos.size());
        rvgl_req_bo_free q{};
        q.bo = *it;
        call(q, RVGL_CMD_BO_FREE);
        w.bos.erase(it);
        break;
      }
      case 8: {  // SPM_ACQUIRE
        rvgl_req_spm_acquire q{};
        q.ring_idx = kSpmRing;
        if (call(q, RVGL_CMD_SPM_ACQUIRE) == 0) w.spm = true;
        break;
      }
      case 9: {  // SPM_SET_DEST into a resource or a BO, a short timeout
        rvgl_req_spm_set_dest q{};
        if (in.u8() & 1 && !w.bos.empty())
          q.bo = *std::next(w.bos.begin(), in.u8() % w.bos.size());
        else
          q.res_id = rid;
        q.size = (in.u8() % 8) ? kPage : 0;
        q.timeout_ms = in.u8() % 4;
        call(q, RVGL_CMD_SPM_SET_DEST);
        break;
      }
      case 10: {  // SPM_RELEASE
        rvgl_req_spm_release q{};
        call(q, RVGL_CMD_SPM_RELEASE);
        w.spm = false;
        break;
      }
      case 11:  // time passes: the stream flows, blocked calls return
        std::this_thread::sleep_for(std::chrono::milliseconds(in.u8() % 4));
        break;
      case 12:  // the guest goes away and comes back
        stop();
        if (!start()) return 0;
        break;
    }
    check();
  }
  stop();
  std::this_thread::sleep_for(std::chrono::milliseconds(5));  // past every timeout used
  check();
  return 0;
}
