// Userptr import: guest RAM is a memfd (as QEMU's memory-backend-memfd,share=on); a blob's pages
// arrive as the VMM's iovecs, one entry per guest page run. The import through
// virgl_renderer_resource_create_blob (GUEST + USERPTR) is timed against one memcpy of the same
// bytes in the same run, and the emulator's counters say what the host created and copied.
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <stdexcept>
#include <vector>

#include "amd_packets.h"
#include "rvgl_emu.h"
#include "support/guarded.h"
#include "support/api_guest.h"
#include "support/clock.h"
#include "support/proc_stats.h"
#include "support/stats.h"
#include "support/virgl_host.h"
#include "util/mapping.h"
#include "util/unique_fd.h"

namespace rvgl::bench {
namespace {

constexpr uint64_t kPage = 4096;

struct Layout {
  const char *name;
  uint64_t total;
  uint64_t piece;  // bytes per iovec entry
  bool shuffled;   // entries in random guest-page order (scattered guest pages)
};

const Layout kLayouts[] = {
    {"1GiB_4KiB_shuffled", 1ull << 30, kPage, true},
    {"1GiB_4KiB_in_order", 1ull << 30, kPage, false},
    {"1GiB_2MiB_shuffled", 1ull << 30, 2ull << 20, true},
    {"64MiB_4KiB_shuffled", 64ull << 20, kPage, true},
};

Mapping map_populated(int fd, uint64_t size) {
  const int flags = (fd >= 0 ? MAP_SHARED : MAP_PRIVATE | MAP_ANONYMOUS) | MAP_POPULATE;
  void *p = mmap(nullptr, size, PROT_READ | PROT_WRITE, flags, fd, 0);
  if (p == MAP_FAILED) throw std::runtime_error("mmap");
  return Mapping(p, size);
}

// Reads the first dword of the first blob pages back through the GPU (SDMA copy of the userptr
// VA range into a mapped buffer) and compares them with the memfd pages the iovecs named: the
// import must expose the guest's very pages, in blob order.
bool gpu_sees_pages(VirglHost &host, ApiGuest &g, uint32_t res, uint64_t size,
                    const std::vector<iovec> &iov) {
  constexpr uint64_t kCheck = 64 * 1024;
  ApiBuffer src;
  src.res = res;
  src.size = size;
  g.va_map(src, RVGL_VA_FLAG_READ);
  ApiBuffer dst = g.mapped_bo(kCheck, RVGL_DOMAIN_GTT);
  ApiBuffer ib = g.mapped_bo(4096, RVGL_DOMAIN_GTT);
  std::vector<uint32_t> words;
  rvgl::packets::sdma_copy_linear(words, dst.va, src.va, kCheck);
  rvgl::packets::sdma_pad(words);
  std::memcpy(ib.cpu, words.data(), words.size() * 4);
  const uint32_t q = g.queue_create(RVGL_IP_SDMA, 1);
  g.submit(q, ib.va, static_cast<uint32_t>(words.size()));
  g.fence(1, 1);
  if (!host.wait_fence(g.ctx_id(), 1, 1)) return false;
  const uint64_t piece = iov[0].iov_len;
  for (uint64_t off = 0; off < kCheck; off += kPage) {
    const auto *at = static_cast<const uint8_t *>(iov[off / piece].iov_base) + off % piece;
    uint32_t want, got;
    std::memcpy(&want, at, 4);
    std::memcpy(&got, dst.cpu + off, 4);
    if (want != got || !(want & 0x80000000u)) return false;
  }
  return true;
}

void BM_UserptrImport(benchmark::State &state) {
  const Layout &l = kLayouts[state.range(0)];
  state.SetLabel(l.name);
  const uint64_t n = l.total / l.piece;

  // Sealed against resizing, as QEMU's memory-backend-memfd (seal=on, its default) leaves guest
  // RAM: the kernel's udmabuf takes only such memfds.
  UniqueFd memfd(memfd_create("bench-guest-ram", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!memfd || ftruncate(memfd.get(), static_cast<off_t>(l.total)) ||
      fcntl(memfd.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL))
    throw std::runtime_error("memfd");
  Mapping ram = map_populated(memfd.get(), l.total);
  Mapping copy = map_populated(-1, l.total);
  auto *ram8 = ram.as<uint8_t>();
  for (uint64_t p = 0; p < l.total / kPage; ++p) {
    const auto tag = static_cast<uint32_t>(p) | 0x80000000u;
    std::memcpy(ram8 + p * kPage, &tag, 4);
  }

  std::vector<uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0u);
  if (l.shuffled) std::shuffle(order.begin(), order.end(), std::mt19937(42));
  std::vector<iovec> iov(n);
  for (uint64_t i = 0; i < n; ++i)
    iov[i] = {ram8 + uint64_t{order[i]} * l.piece, l.piece};

  VirglHost host;
  std::vector<double> memcpy_ns, import_ns;
  double objects = 0, udmabufs = 0, gpu_bytes_copied = 0, rss_delta = 0;
  bool verified = false;
  uint32_t ctx = 1;
  for (auto _ : state) {
    ApiGuest g(ctx, ctx * 1000);
    ++ctx;
    g.start();

    uint64_t t0 = now_ns();
    std::memcpy(copy.get(), ram.get(), l.total);
    memcpy_ns.push_back(static_cast<double>(now_ns() - t0));
    benchmark::DoNotOptimize(copy.get());

    rvgl_emu_counters before{}, after{};
    rvgl_emu_get_counters(&before, sizeof before);
    const uint64_t rss0 = resident_bytes();
    t0 = now_ns();
    const uint32_t res = g.userptr_blob(iov, l.total);
    import_ns.push_back(static_cast<double>(now_ns() - t0));
    const uint64_t rss1 = resident_bytes();
    rvgl_emu_get_counters(&after, sizeof after);
    objects = static_cast<double>(after.bos_created - before.bos_created);
    udmabufs = static_cast<double>(after.udmabufs_created - before.udmabufs_created);
    gpu_bytes_copied = static_cast<double>(after.bytes_copied - before.bytes_copied);
    rss_delta = static_cast<double>(rss1) - static_cast<double>(rss0);

    if (!verified) {
      if (!gpu_sees_pages(host, g, res, l.total, iov)) {
        state.SkipWithError("the GPU does not see the guest pages in blob order");
        break;
      }
      verified = true;
    }
    state.SetIterationTime(import_ns.back() * 1e-9);
  }
  const double m = median(memcpy_ns), im = median(import_ns);
  state.counters["bytes"] = static_cast<double>(l.total);
  state.counters["iovecs"] = static_cast<double>(n);
  state.counters["memcpy_ms"] = m / 1e6;
  state.counters["import_ms"] = im / 1e6;
  state.counters["import_vs_memcpy"] = im / m;
  state.counters["host_gem_objects"] = objects;
  state.counters["host_udmabufs"] = udmabufs;
  state.counters["gpu_bytes_copied"] = gpu_bytes_copied;
  state.counters["rss_delta_bytes"] = rss_delta;
}

}  // namespace

BENCHMARK(guarded<BM_UserptrImport>)
    ->Name("BM_UserptrImport")
    ->ArgName("layout")
    ->DenseRange(0, 3)
    ->Iterations(3)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace rvgl::bench
