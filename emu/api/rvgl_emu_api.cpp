// The C test interface (rvgl_emu.h) and the counters file other processes read.
#include "rvgl_emu.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "core/counters.h"
#include "core/device.h"
#include "core/device_file.h"
#include "core/emulator.h"
#include "core/runtime_knobs.h"
#include "exec/worker_thread.h"
#include "interpose/real_libc.h"
#include "ioctl/dispatch.h"
#include "util/kernel_call.h"

using namespace rvgl::emu;

namespace {

void snapshot(rvgl_emu_counters &c) {
  const Counters &k = counters();
  c.bos_alive = k.bos_alive.load();
  c.bos_created = k.bos_created.load();
  c.userptr_alive = k.userptr_alive.load();
  c.bytes_copied = k.bytes_copied.load();
  c.bytes_written = k.bytes_written.load();
  c.jobs_submitted = k.jobs_submitted.load();
  c.jobs_completed = k.jobs_completed.load();
  c.jobs_failed = k.jobs_failed.load();
  c.vm_faults = k.vm_faults.load();
  c.gpu_resets = k.gpu_resets.load();
  c.udmabufs_alive = k.udmabufs_alive.load();
  c.udmabufs_created = k.udmabufs_created.load();
  c.device_files_open = k.device_files_open.load();
  c.contexts_alive = k.contexts_alive.load();
  c.syncobjs_alive = k.syncobjs_alive.load();
  c.userqs_alive = k.userqs_alive.load();
  c.userq_dwords = k.userq_packets.load();
  c.ioctls = k.ioctls.load();
  c.injected_failures = k.injected_failures.load();
  c.spm_bytes = k.spm_bytes.load();
  c.dmabuf_exports = k.dmabuf_exports.load();
  c.dmabuf_imports = k.dmabuf_imports.load();
  c.syncobj_eventfds_registered = k.syncobj_eventfds_registered.load();
  c.syncobj_eventfds_signalled = k.syncobj_eventfds_signalled.load();
  c.userq_batches_completed = k.userq_batches_completed.load();
  c.userq_batches_failed = k.userq_batches_failed.load();
}

std::string counters_text() {
  rvgl_emu_counters c{};
  snapshot(c);
  const std::pair<const char *, uint64_t> rows[] = {
      {"bos_alive", c.bos_alive},
      {"bos_created", c.bos_created},
      {"userptr_alive", c.userptr_alive},
      {"bytes_copied", c.bytes_copied},
      {"bytes_written", c.bytes_written},
      {"jobs_submitted", c.jobs_submitted},
      {"jobs_completed", c.jobs_completed},
      {"jobs_failed", c.jobs_failed},
      {"vm_faults", c.vm_faults},
      {"gpu_resets", c.gpu_resets},
      {"udmabufs_alive", c.udmabufs_alive},
      {"udmabufs_created", c.udmabufs_created},
      {"device_files_open", c.device_files_open},
      {"contexts_alive", c.contexts_alive},
      {"syncobjs_alive", c.syncobjs_alive},
      {"userqs_alive", c.userqs_alive},
      {"userq_dwords", c.userq_dwords},
      {"ioctls", c.ioctls},
      {"injected_failures", c.injected_failures},
      {"spm_bytes", c.spm_bytes},
      {"dmabuf_exports", c.dmabuf_exports},
      {"dmabuf_imports", c.dmabuf_imports},
      {"syncobj_eventfds_registered", c.syncobj_eventfds_registered},
      {"syncobj_eventfds_signalled", c.syncobj_eventfds_signalled},
      {"userq_batches_completed", c.userq_batches_completed},
      {"userq_batches_failed", c.userq_batches_failed},
  };
  std::string out = "pid " + std::to_string(getpid()) + "\n";
  for (const auto &[k, v] : rows)
    out += std::string(k) + " " + std::to_string(v) + "\n";
  return out;
}

// Writes the file through a temporary and rename(), so a reader never sees half of it.
int write_counters(std::string *path_out) {
  std::string dir;
  {
    Emulator &e = Emulator::get();
    std::lock_guard lk(e.mutex());
    dir = e.config().state_dir;
  }
  ::mkdir(dir.c_str(), 0700);
  const std::string path = dir + "/counters-" + std::to_string(getpid()) + ".txt";
  const std::string tmp = path + ".tmp";
  const int fd = real::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return -errno;
  const std::string text = counters_text();
  const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  real::close(fd);
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) return -EIO;
  if (path_out) *path_out = path;
  return 0;
}

}  // namespace

namespace rvgl::emu {

// RVGL_EMU_COUNTERS_INTERVAL_MS: a low-rate thread keeps the counters file fresh for readers in
// other processes, and the file is written once more at exit. Started when a device is opened (in
// a forked child too: the parent's thread does not exist there).
void note_device_opened() {
  static std::mutex mu;
  static pid_t started_in = 0;
  static WorkerThread *thread = nullptr;
  if (knobs().counters_interval_ms.load() == 0) return;
  std::lock_guard lk(mu);
  if (started_in == getpid()) return;
  if (started_in == 0)
    std::atexit([] {
      if (knobs().counters_interval_ms.load()) write_counters(nullptr);
    });
  started_in = getpid();
  if (thread) thread->forget();
  thread = new WorkerThread;  // lives as long as the process
  thread->start([] {
    std::string last;
    while (true) {
      const uint64_t ms = knobs().counters_interval_ms.load();
      std::this_thread::sleep_for(std::chrono::milliseconds(ms ? ms : 1000));
      if (!ms) continue;
      std::string now = counters_text();
      if (now != last && write_counters(nullptr) == 0) last = std::move(now);
    }
  });
}

}  // namespace rvgl::emu

extern "C" {

int rvgl_emu_active(void) {
  return 1;
}

int rvgl_emu_get_counters(rvgl_emu_counters *out, size_t size) {
  if (!out) return -EINVAL;
  rvgl_emu_counters c{};
  snapshot(c);
  std::memcpy(out, &c, std::min(size, sizeof(c)));
  return 0;
}

uint64_t rvgl_emu_thread_ioctls(void) {
  return thread_ioctls();
}

int rvgl_emu_thread_in_kernel(void) {
  return rvgl::emu::t_kernel_call_depth;
}

int rvgl_emu_get_file_counters(int fd, rvgl_emu_file_counters *out, size_t size) {
  if (!out) return -EINVAL;
  Emulator &e = Emulator::get();
  std::lock_guard lk(e.mutex());
  auto df = e.device_file_locked(fd);
  if (!df) return -EBADF;
  rvgl_emu_file_counters c{};
  c.bo_handles = df->bos.size();
  c.vm_mappings = df->vm->mapping_count();
  c.contexts = df->contexts.size();
  c.syncobjs = df->syncobjs.size();
  c.bo_lists = df->bo_lists.size();
  c.userqs = df->userqs.size();
  c.jobs_submitted = df->jobs_submitted;
  c.device_index = static_cast<uint64_t>(df->device.index());
  std::memcpy(out, &c, std::min(size, sizeof(c)));
  return 0;
}

int rvgl_emu_set_knob(const char *name, const char *value) {
  if (!name || !value) return -EINVAL;
  Emulator &e = Emulator::get();
  std::lock_guard lk(e.mutex());
  return e.set_knob_locked(name, value);
}

void rvgl_emu_reset_fault_injection(void) {
  Emulator &e = Emulator::get();
  std::lock_guard lk(e.mutex());
  for (const char *k : {"RVGL_EMU_FAIL", "RVGL_EMU_HANG_JOB", "RVGL_EMU_SOFT_RECOVER_JOB",
                        "RVGL_EMU_RING_RESET_JOB", "RVGL_EMU_RECOVERY_COUNT_DELAY_US",
                        "RVGL_EMU_RECOVERY_COUNT_AT_QUERY", "RVGL_EMU_FULL_RESET_US",
                        "RVGL_EMU_RESET_JOB", "RVGL_EMU_FAULT_VA"})
    e.set_knob_locked(
        k, k == std::string("RVGL_EMU_FAIL") || k == std::string("RVGL_EMU_FAULT_VA") ? "" : "0");
  e.set_knob_locked("RVGL_EMU_RESET_VRAM_LOST", "0");
  e.faults().reset();
}

void rvgl_emu_count_calls(void) {
  Emulator::get().faults().count_calls();
}

namespace {

size_t write_call_counts(const std::map<std::string, uint64_t> &calls, char *buf, size_t size) {
  std::string text;
  for (const auto &[name, n] : calls)
    text += name + " " + std::to_string(n) + "\n";
  if (buf && size) {
    const size_t n = std::min(size - 1, text.size());
    std::memcpy(buf, text.data(), n);
    buf[n] = '\0';
  }
  return text.size();
}

}  // namespace

size_t rvgl_emu_call_counts(char *buf, size_t size) {
  return write_call_counts(Emulator::get().faults().calls(), buf, size);
}

size_t rvgl_emu_counting_thread_call_counts(char *buf, size_t size) {
  return write_call_counts(Emulator::get().faults().counting_thread_calls(), buf, size);
}

int rvgl_emu_write_counters_file(char *path_out, size_t path_size) {
  std::string path;
  if (int r = write_counters(&path)) return r;
  if (path_out && path_size) {
    const size_t n = std::min(path_size - 1, path.size());
    std::memcpy(path_out, path.data(), n);
    path_out[n] = '\0';
  }
  return 0;
}

const char *rvgl_emu_state_dir(void) {
  static std::string dir;
  Emulator &e = Emulator::get();
  std::lock_guard lk(e.mutex());
  dir = e.config().state_dir;
  return dir.c_str();
}

}  // extern "C"
