// What the emulated GPU itself costs on this machine, to read the other figures against: a plain
// system call, one cheap emulated ioctl (INFO ACCEL_WORKING: argument copy-in and copy-out, no
// GPU work), and one near-empty job (a single SDMA NOP IB) submitted and waited for straight
// through libdrm_amdgpu. Wall and whole-process CPU time per call.
#include <benchmark/benchmark.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <vector>

#include "amd_packets.h"
#include "support/clock.h"
#include "support/direct_gpu.h"
#include "support/guarded.h"
#include "support/side_sampler.h"

namespace rvgl::bench {
namespace {

template <class F>
void per_call(benchmark::State &state, F &&call) {
  for (int i = 0; i < 100; ++i)
    call();
  const uint64_t cpu0 = process_cpu_ns(), t0 = now_ns();
  for (auto _ : state)
    call();
  const double n = static_cast<double>(state.iterations());
  state.counters["wall_ns_per_call"] = static_cast<double>(now_ns() - t0) / n;
  state.counters["cpu_ns_per_call"] = static_cast<double>(process_cpu_ns() - cpu0) / n;
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

void BM_EmulatedEmptyJob(benchmark::State &state) {
  DirectGpu gpu;
  auto ib = gpu.buffer(4096, AMDGPU_GEM_DOMAIN_GTT, true);
  std::vector<uint32_t> words;
  rvgl::packets::sdma_pad(words);
  rvgl::packets::sdma_nop(words);
  rvgl::packets::sdma_pad(words);
  std::memcpy(ib->cpu(), words.data(), words.size() * 4);
  per_call(state, [&] {
    gpu.wait(AMDGPU_HW_IP_DMA,
             gpu.submit(AMDGPU_HW_IP_DMA, ib->va(), static_cast<uint32_t>(words.size())));
  });
}

}  // namespace

BENCHMARK(guarded<BM_Syscall>)->Name("BM_Syscall")->Iterations(20000);
BENCHMARK(guarded<BM_EmulatedIoctl>)->Name("BM_EmulatedIoctl")->Iterations(5000);
BENCHMARK(guarded<BM_EmulatedEmptyJob>)->Name("BM_EmulatedEmptyJob")->Iterations(2000);

}  // namespace rvgl::bench
