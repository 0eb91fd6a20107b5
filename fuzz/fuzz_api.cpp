// Harness 2, stateful: the input is a script of virglrenderer API calls, made through our
// library in front of the real libvirglrenderer exactly as a VMM makes them: contexts, blobs
// (HOST3D shared page and claims, GUEST userptr with random iovec layouts over "guest RAM"),
// submits, fences, polls, attach/detach, map, export, unref, destroy. Whatever the script leaves
// behind is torn down at the end of the input, so inputs do not depend on each other.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <set>
#include <vector>

#include "rocm_virgl_protocol.h"
#include "virgl_api.h"

namespace {

constexpr uint32_t kCapsetRocm = 8;
constexpr size_t kRamPages = 256;

uint64_t fences_written;
void write_fence(void *, uint32_t) {}
void write_context_fence(void *, uint32_t, uint32_t, uint64_t) {
  ++fences_written;
}

struct Reader {
  const uint8_t *p;
  size_t n;
  bool empty() const { return n == 0; }
  uint8_t u8() {
    if (!n) return 0;
    --n;
    return *p++;
  }
  uint32_t u32() {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i)
      v |= uint32_t{u8()} << (8 * i);
    return v;
  }
  std::vector<uint8_t> bytes(size_t want) {
    const size_t k = want < n ? want : n;
    std::vector<uint8_t> out(p, p + k);
    p += k;
    n -= k;
    return out;
  }
};

uint8_t *ram;
virgl_renderer_callbacks cbs;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  void *m =
      mmap(nullptr, kRamPages * 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
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
  std::set<uint32_t> ctxs, res;
  uint32_t seqno = 0;
  while (!in.empty()) {
    const uint8_t op = in.u8() % 14;
    const uint32_t ctx = 1 + in.u8() % 4;  // a few ids so calls meet the same contexts
    const uint32_t rid = 1 + in.u8() % 16;
    switch (op) {
      case 0:  // create
        if (!virgl_renderer_context_create_with_flags(ctx, in.u8() % 3 ? kCapsetRocm : in.u8(), 4,
                                                      "fuzz"))
          ctxs.insert(ctx);
        break;
      case 1:
        virgl_renderer_context_destroy(ctx);
        ctxs.erase(ctx);
        break;
      case 2: {  // HOST3D: the shared page or a claim
        virgl_renderer_resource_create_blob_args a{};
        a.res_handle = rid;
        a.ctx_id = ctx;
        a.blob_mem = VIRGL_RENDERER_BLOB_MEM_HOST3D;
        a.blob_flags = in.u8() & 7;
        a.blob_id = in.u8() % 4;
        a.size = a.blob_id ? uint64_t{in.u8()} * 4096 : 65536;
        if (!virgl_renderer_resource_create_blob(&a)) res.insert(rid);
        break;
      }
      case 3: {  // GUEST userptr over guest RAM, iovecs as the script says
        iovec iov[8];
        const uint32_t n = 1 + in.u8() % 8;
        uint64_t total = 0;
        for (uint32_t i = 0; i < n; ++i) {
          const uint32_t page = in.u8() % kRamPages;
          const uint32_t pages = 1 + in.u8() % 4;
          const uint32_t skew = (in.u8() & 1) ? in.u8() : 0;  // sometimes misaligned
          iov[i].iov_base = ram + page * 4096 + skew;
          iov[i].iov_len = std::min<size_t>(pages, kRamPages - page) * 4096;
          total += iov[i].iov_len;
        }
        virgl_renderer_resource_create_blob_args a{};
        a.res_handle = rid;
        a.ctx_id = ctx;
        a.blob_mem = (in.u8() & 1) ? VIRGL_RENDERER_BLOB_MEM_GUEST : 3;  // or HOST3D_GUEST
        a.blob_flags = (in.u8() & 1) ? 0x18 : 0x8;                       // USERPTR[_RDONLY]
        a.size = (in.u8() & 7) ? total : in.u32();
        a.iovecs = iov;
        a.num_iovs = n;
        if (!virgl_renderer_resource_create_blob(&a)) res.insert(rid);
        break;
      }
      case 4: {  // a command buffer, seqnos rewritten in order
        std::vector<uint8_t> cmd = in.bytes(in.u8() * 8);
        for (size_t pos = 0; pos + 16 <= cmd.size();) {
          rvgl_req_hdr h;
          std::memcpy(&h, cmd.data() + pos, sizeof(h));
          if (h.len < 16 || h.len > cmd.size() - pos || h.len % 8) break;
          h.seqno = ++seqno;
          std::memcpy(cmd.data() + pos, &h, sizeof(h));
          pos += h.len;
        }
        virgl_renderer_submit_cmd(cmd.data(), static_cast<int>(ctx),
                                  static_cast<int>(cmd.size() / 4));
        break;
      }
      case 5:
        virgl_renderer_context_create_fence(ctx, VIRGL_RENDERER_FENCE_FLAG_MERGEABLE, in.u8() % 70,
                                            in.u32());
        break;
      case 6:
        virgl_renderer_context_poll(ctx);
        virgl_renderer_poll();
        break;
      case 7:
        virgl_renderer_ctx_attach_resource(static_cast<int>(ctx), static_cast<int>(rid));
        break;
      case 8:
        virgl_renderer_ctx_detach_resource(static_cast<int>(ctx), static_cast<int>(rid));
        break;
      case 9:
        virgl_renderer_resource_unref(rid);
        res.erase(rid);
        break;
      case 10: {
        void *map = nullptr;
        uint64_t sz = 0;
        if (!virgl_renderer_resource_map(rid, &map, &sz) && map && sz) {
          static_cast<volatile uint8_t *>(map)[0];
          virgl_renderer_resource_unmap(rid);
        }
        break;
      }
      case 11: {
        uint32_t type = 0;
        int fd = -1;
        if (!virgl_renderer_resource_export_blob(rid, &type, &fd) && fd >= 0) close(fd);
        break;
      }
      case 12: {
        virgl_renderer_resource_info info{};
        virgl_renderer_resource_get_info(static_cast<int>(rid), &info);
        uint32_t map_info;
        virgl_renderer_resource_get_map_info(rid, &map_info);
        break;
      }
      case 13: {
        int fd = virgl_renderer_context_get_poll_fd(ctx);
        (void)fd;
        break;
      }
    }
  }
  for (uint32_t r : res)
    virgl_renderer_resource_unref(r);
  for (uint32_t c : ctxs)
    virgl_renderer_context_destroy(c);
  return 0;
}
