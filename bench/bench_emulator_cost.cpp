// What the emulated GPU itself costs on this machine, to read the other figures against, and the
// parts of it issue 16's cost model targets: a plain system call; one cheap emulated ioctl (INFO
// ACCEL_WORKING: argument copy-in, the answer copied out, no GPU work); one near-empty job (a
// single SDMA NOP IB) submitted and waited for straight through libdrm_amdgpu; the context
// switches per such job with 0 or 64 threads of other files idling in syncobj waits; udmabuf
// creation per page, beside what the host's real kernel charges for pinning pages; GEM_USERPTR
// validation with a small and a large memory map.
#include <amdgpu.h>
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <linux/io_uring.h>
#include <linux/udmabuf.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <xf86drm.h>

#include <algorithm>
#include <atomic>
#include <numeric>
#include <random>
#include <cstring>
#include <stdexcept>
#include <thread>
#include <vector>

#include "amd_packets.h"
#include "support/clock.h"
#include "support/direct_gpu.h"
#include "support/guarded.h"
#include "support/side_sampler.h"

namespace rvgl::bench {
namespace {

constexpr int kBatch = 100;

// Wall and whole-process CPU time per call: the mean over all iterations, and the median of
// per-batch means (robust against the other tenants of a shared machine).
template <class F>
void per_call(benchmark::State &state, F &&call) {
  for (int i = 0; i < kBatch; ++i)
    call();
  std::vector<double> wall, cpu;
  const uint64_t cpu0 = process_cpu_ns(), t0 = now_ns();
  uint64_t bc = cpu0, bt = t0;
  int in_batch = 0;
  for (auto _ : state) {
    call();
    if (++in_batch == kBatch) {
      const uint64_t c = process_cpu_ns(), t = now_ns();
      wall.push_back(static_cast<double>(t - bt) / kBatch);
      cpu.push_back(static_cast<double>(c - bc) / kBatch);
      bt = t;
      bc = c;
      in_batch = 0;
    }
  }
  const double n = static_cast<double>(state.iterations());
  state.counters["wall_ns_per_call"] = static_cast<double>(now_ns() - t0) / n;
  state.counters["cpu_ns_per_call"] = static_cast<double>(process_cpu_ns() - cpu0) / n;
  state.counters["median_wall_ns_per_call"] = median(wall);
  state.counters["median_cpu_ns_per_call"] = median(cpu);
}

void BM_Syscall(benchmark::State &state) {
  per_call(state, [] { benchmark::DoNotOptimize(syscall(SYS_getppid)); });
}

void BM_EmulatedIoctl(benchmark::State &state) {
  DirectGpu gpu;
  per_call(state, [&] {
    uint32_t working = 0;
    if (amdgpu_query_info(gpu.device(), AMDGPU_INFO_ACCEL_WORKING, sizeof(working), &working))
      throw std::runtime_error("INFO");
  });
}

std::vector<uint32_t> nop_ib() {
  std::vector<uint32_t> words;
  rvgl::packets::sdma_pad(words);
  rvgl::packets::sdma_nop(words);
  rvgl::packets::sdma_pad(words);
  return words;
}

void BM_EmulatedEmptyJob(benchmark::State &state) {
  DirectGpu gpu;
  auto ib = gpu.buffer(4096, AMDGPU_GEM_DOMAIN_GTT, true);
  const std::vector<uint32_t> words = nop_ib();
  std::memcpy(ib->cpu(), words.data(), words.size() * 4);
  per_call(state, [&] {
    gpu.wait(AMDGPU_HW_IP_DMA,
             gpu.submit(AMDGPU_HW_IP_DMA, ib->va(), static_cast<uint32_t>(words.size())));
  });
}

// Voluntary (a thread blocked) and involuntary (preempted: the machine's load) switches of every
// thread of the process.
std::pair<uint64_t, uint64_t> context_switches() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return {static_cast<uint64_t>(ru.ru_nvcsw), static_cast<uint64_t>(ru.ru_nivcsw)};
}

// A thread of another file blocked in SYNCOBJ_WAIT (WAIT_FOR_SUBMIT) on a syncobj nobody
// signals until teardown: what an idle context's fence retirer does.
class IdleWaiter {
 public:
  IdleWaiter() : fd_(::open("/dev/dri/renderD128", O_RDWR | O_CLOEXEC)) {
    if (fd_ < 0 || drmSyncobjCreate(fd_, 0, &so_)) throw std::runtime_error("idle waiter setup");
    thread_ = std::thread([this] {
      uint32_t h = so_, first = 0;
      waiting_.store(true);
      drmSyncobjWait(fd_, &h, 1, INT64_MAX, DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT, &first);
    });
  }
  ~IdleWaiter() {
    drmSyncobjSignal(fd_, &so_, 1);
    thread_.join();
    drmSyncobjDestroy(fd_, so_);
    ::close(fd_);
  }
  bool waiting() const { return waiting_.load(); }

 private:
  int fd_;
  uint32_t so_ = 0;
  std::atomic<bool> waiting_{false};
  std::thread thread_;
};

void BM_EmulatorContextSwitches(benchmark::State &state) {
  const auto idle = static_cast<int>(state.range(0));
  DirectGpu gpu;
  auto ib = gpu.buffer(4096, AMDGPU_GEM_DOMAIN_GTT, true);
  const std::vector<uint32_t> words = nop_ib();
  std::memcpy(ib->cpu(), words.data(), words.size() * 4);
  std::vector<std::unique_ptr<IdleWaiter>> waiters;
  for (int i = 0; i < idle; ++i)
    waiters.push_back(std::make_unique<IdleWaiter>());
  for (const auto &w : waiters)
    while (!w->waiting())
      std::this_thread::yield();
  // The flag goes up just before the ioctl: give the threads time to block in it.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  constexpr int kOps = 500;
  auto job = [&] {
    gpu.wait(AMDGPU_HW_IP_DMA,
             gpu.submit(AMDGPU_HW_IP_DMA, ib->va(), static_cast<uint32_t>(words.size())));
  };
  for (int i = 0; i < 20; ++i)
    job();
  std::vector<double> per_op, voluntary, wall;
  for (auto _ : state) {
    const auto cs0 = context_switches();
    const uint64_t t0 = now_ns();
    for (int i = 0; i < kOps; ++i)
      job();
    wall.push_back(static_cast<double>(now_ns() - t0) / kOps);
    const auto cs1 = context_switches();
    voluntary.push_back(static_cast<double>(cs1.first - cs0.first) / kOps);
    per_op.push_back(static_cast<double>(cs1.first + cs1.second - cs0.first - cs0.second) / kOps);
  }
  state.counters["idle_waiters"] = idle;
  state.counters["context_switches_per_op"] = median(per_op);
  state.counters["voluntary_switches_per_op"] = median(voluntary);
  state.counters["wall_ns_per_op"] = median(wall);
}

// UDMABUF_CREATE_LIST of `pages` one-page items, in reverse page order so no two items are
// adjacent in the file, then close: per page.
void BM_UdmabufCreateList(benchmark::State &state) {
  const auto pages = static_cast<uint32_t>(state.range(0));
  const long page = sysconf(_SC_PAGESIZE);
  const int memfd = memfd_create("bench-udmabuf", MFD_ALLOW_SEALING | MFD_CLOEXEC);
  if (memfd < 0 || ftruncate(memfd, static_cast<off_t>(pages) * page) != 0 ||
      fcntl(memfd, F_ADD_SEALS, F_SEAL_SHRINK) != 0)
    throw std::runtime_error("memfd");
  const int dev = ::open("/dev/udmabuf", O_RDWR | O_CLOEXEC);
  if (dev < 0) throw std::runtime_error("no /dev/udmabuf");
  std::vector<uint8_t> arg(sizeof(udmabuf_create_list) + pages * sizeof(udmabuf_create_item));
  auto *list = reinterpret_cast<udmabuf_create_list *>(arg.data());
  list->flags = UDMABUF_FLAGS_CLOEXEC;
  list->count = pages;
  for (uint32_t i = 0; i < pages; ++i)
    list->list[i] = udmabuf_create_item{static_cast<uint32_t>(memfd), 0,
                                        static_cast<uint64_t>(pages - 1 - i) * page,
                                        static_cast<uint64_t>(page)};
  std::vector<double> us_per_page;
  for (auto _ : state) {
    const uint64_t t0 = now_ns();
    const int buf = ioctl(dev, UDMABUF_CREATE_LIST, list);
    if (buf < 0) throw std::runtime_error("UDMABUF_CREATE_LIST");
    ::close(buf);
    us_per_page.push_back(static_cast<double>(now_ns() - t0) / 1000.0 / pages);
  }
  ::close(dev);
  ::close(memfd);
  state.counters["pages"] = pages;
  state.counters["us_per_page"] = median(us_per_page);
}

// What the host's real kernel charges for long-term pinning of sealed-memfd pages, for reading
// the emulated udmabuf against: the emulator does not pin, the kernel's udmabuf_create() does
// (memfd_pin_folios(), or shmem_read_mapping_page() per page before 6.11). The nearest kernel
// path reachable without /dev/udmabuf is io_uring's IORING_REGISTER_BUFFERS, which pins each
// buffer's pages FOLL_LONGTERM (io_sqe_buffer_register -> io_pin_pages -> pin_user_pages_fast).
// `pages` 4 KiB pages of a mapped memfd, registered as buffers of `buffer_pages` pages each
// (shuffled one-page buffers: the per-item kernel work of a scattered udmabuf list, plus
// io_uring's own per-buffer allocation, so an upper bound; 1024-page buffers: the per-page
// pinning alone), then unregistered: per page. 1024 pages stay within the default 8 MiB
// RLIMIT_MEMLOCK that io_uring charges without CAP_IPC_LOCK.
void BM_KernelPagePin(benchmark::State &state) {
  const auto pages = static_cast<size_t>(state.range(0));
  const auto per_buffer = static_cast<size_t>(state.range(1));
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  io_uring_params params{};
  const int ring = static_cast<int>(syscall(__NR_io_uring_setup, 4, &params));
  if (ring < 0) {
    state.SkipWithError("io_uring_setup failed (io_uring disabled?)");
    return;
  }
  const int memfd = memfd_create("bench-pin", MFD_ALLOW_SEALING | MFD_CLOEXEC);
  if (memfd < 0 || ftruncate(memfd, static_cast<off_t>(pages * page)) != 0 ||
      fcntl(memfd, F_ADD_SEALS, F_SEAL_SHRINK) != 0)
    throw std::runtime_error("memfd");
  void *ram =
      mmap(nullptr, pages * page, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, memfd, 0);
  if (ram == MAP_FAILED) throw std::runtime_error("mmap");
  std::vector<size_t> order(pages / per_buffer);
  std::iota(order.begin(), order.end(), size_t{0});
  std::shuffle(order.begin(), order.end(), std::mt19937(42));
  std::vector<iovec> iov;
  for (size_t b : order)
    iov.push_back({static_cast<uint8_t *>(ram) + b * per_buffer * page, per_buffer * page});
  std::vector<double> us_per_page;
  for (auto _ : state) {
    const uint64_t t0 = now_ns();
    if (syscall(__NR_io_uring_register, ring, IORING_REGISTER_BUFFERS, iov.data(),
                static_cast<unsigned>(iov.size())) != 0) {
      state.SkipWithError("IORING_REGISTER_BUFFERS failed (RLIMIT_MEMLOCK?)");
      break;
    }
    us_per_page.push_back(static_cast<double>(now_ns() - t0) / 1000.0 / static_cast<double>(pages));
    syscall(__NR_io_uring_register, ring, IORING_UNREGISTER_BUFFERS, nullptr, 0);
  }
  munmap(ram, pages * page);
  ::close(memfd);
  ::close(ring);
  state.counters["pages"] = static_cast<double>(pages);
  state.counters["buffer_pages"] = static_cast<double>(per_buffer);
  if (!us_per_page.empty()) state.counters["us_per_page"] = median(us_per_page);
}

// GEM_USERPTR with VALIDATE (libdrm's amdgpu_create_bo_from_user_mem) of 1 MiB, then free, with
// `extra` more VMAs in the process (pages of alternating protection so none merge): the kernel's
// VMA lookup does not depend on how many there are.
void BM_UserptrValidate(benchmark::State &state) {
  const auto extra = static_cast<size_t>(state.range(0));
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  void *many = MAP_FAILED;
  if (extra) {
    many = mmap(nullptr, extra * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (many == MAP_FAILED) throw std::runtime_error("mmap");
    for (size_t i = 0; i < extra; i += 2)
      mprotect(static_cast<uint8_t *>(many) + i * page, page, PROT_READ);
  }
  DirectGpu gpu;
  constexpr size_t kSize = 1 << 20;
  void *mem = mmap(nullptr, kSize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) throw std::runtime_error("mmap");
  std::vector<double> us;
  for (auto _ : state) {
    const uint64_t t0 = now_ns();
    amdgpu_bo_handle bo = nullptr;
    if (amdgpu_create_bo_from_user_mem(gpu.device(), mem, kSize, &bo))
      throw std::runtime_error("userptr");
    amdgpu_bo_free(bo);
    us.push_back(static_cast<double>(now_ns() - t0) / 1000.0);
  }
  munmap(mem, kSize);
  if (many != MAP_FAILED) munmap(many, extra * page);
  state.counters["extra_vmas"] = static_cast<double>(extra);
  state.counters["us_per_userptr"] = median(us);
}

}  // namespace

BENCHMARK(guarded<BM_Syscall>)->Name("BM_Syscall")->Iterations(20000);
BENCHMARK(guarded<BM_EmulatedIoctl>)->Name("BM_EmulatedIoctl")->Iterations(5000);
BENCHMARK(guarded<BM_EmulatedEmptyJob>)->Name("BM_EmulatedEmptyJob")->Iterations(2000);
BENCHMARK(guarded<BM_EmulatorContextSwitches>)
    ->Name("BM_EmulatorContextSwitches")
    ->ArgName("idle_waiters")
    ->Arg(0)
    ->Arg(64)
    ->Iterations(5);
BENCHMARK(guarded<BM_UdmabufCreateList>)
    ->Name("BM_UdmabufCreateList")
    ->ArgName("pages")
    ->Arg(16)
    ->Arg(1024)
    ->Iterations(30);
BENCHMARK(guarded<BM_KernelPagePin>)
    ->Name("BM_KernelPagePin")
    ->ArgNames({"pages", "buffer_pages"})
    ->Args({1024, 1})
    ->Args({1024, 1024})
    ->Iterations(30);
BENCHMARK(guarded<BM_UserptrValidate>)
    ->Name("BM_UserptrValidate")
    ->ArgName("extra_vmas")
    ->Arg(0)
    ->Arg(16384)
    ->Iterations(50);

}  // namespace rvgl::bench
