/*
 * The emulated amdgpu kernel's test interface. In-process users (tests, fuzzers, benchmarks linking
 * rvgl_emu_dep) call these directly; a process with librvgl_emu.so preloaded can find them with
 * dlsym(RTLD_DEFAULT, ...). Other processes read the counters file (rvgl_emu_write_counters_file).
 * See emu/README.md.
 */
#ifndef RVGL_EMU_H
#define RVGL_EMU_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RVGL_EMU_API_VERSION 1

/* Process-wide counters. Fields are only ever appended; pass sizeof() so an older caller works. */
struct rvgl_emu_counters {
  uint64_t bos_alive;      /* GEM objects alive (all files, all devices) */
  uint64_t bos_created;    /* GEM objects ever created (incl. userptr and imports) */
  uint64_t userptr_alive;  /* userptr objects alive */
  uint64_t bytes_copied;   /* bytes moved by copy packets (SDMA COPY_LINEAR, PM4 DMA_DATA) */
  uint64_t bytes_written;  /* bytes written by fills and data writes */
  uint64_t jobs_submitted; /* CS ioctls accepted */
  uint64_t jobs_completed; /* CS jobs that finished without error */
  uint64_t jobs_failed;    /* CS jobs that faulted, hung, were cancelled or hit a bad packet */
  uint64_t vm_faults;      /* GPU VM faults */
  uint64_t gpu_resets;     /* GPU resets: knobs, and the full reset that ends a failed job */
  uint64_t udmabufs_alive; /* udmabufs whose pages are still held */
  uint64_t udmabufs_created;
  uint64_t device_files_open; /* open render/primary node file descriptions */
  uint64_t contexts_alive;
  uint64_t syncobjs_alive;
  uint64_t userqs_alive;
  uint64_t userq_dwords;      /* dwords executed from user-queue rings */
  uint64_t ioctls;            /* ioctls handled by the emulator */
  uint64_t injected_failures; /* calls failed by RVGL_EMU_FAIL */
  uint64_t spm_bytes;         /* SPM sample bytes delivered to destination buffers */
  uint64_t dmabuf_exports;
  uint64_t dmabuf_imports;
  uint64_t syncobj_eventfds_registered; /* SYNCOBJ_EVENTFD registrations accepted */
  uint64_t syncobj_eventfds_signalled;  /* registrations that fired (eventfd_signal()) */
  /* User-queue batches (the dwords one doorbell write announced), apart from CS jobs: until
     2026-12-06 they counted in jobs_completed / jobs_failed, which CS never submitted. */
  uint64_t userq_batches_completed;
  uint64_t userq_batches_failed; /* faulted (a stopping fault), hung or a bad packet */
};

/* What one open file description of a node holds (the fd must be an emulated device fd). */
struct rvgl_emu_file_counters {
  uint64_t bo_handles;
  uint64_t vm_mappings;
  uint64_t contexts;
  uint64_t syncobjs;
  uint64_t bo_lists;
  uint64_t userqs;
  uint64_t jobs_submitted;
  uint64_t device_index; /* 0 for renderD128 */
};

/* 1 once the emulator is linked in (always, for callers that can call this). */
int rvgl_emu_active(void);
/* Fills up to `size` bytes of *out. Returns 0. */
int rvgl_emu_get_counters(struct rvgl_emu_counters *out, size_t size);
/* Emulated ioctls made by the calling thread so far: an exact count for a test while other
 * threads (a completion engine) make their own. */
uint64_t rvgl_emu_thread_ioctls(void);
/* Non-zero while the calling thread is inside an emulated kernel call (an interposed entry point
 * on the emulator's path): a test failing its own allocations leaves the kernel's alone. */
int rvgl_emu_thread_in_kernel(void);
/* Returns 0, or -EBADF when fd is not an emulated device fd. */
int rvgl_emu_get_file_counters(int fd, struct rvgl_emu_file_counters *out, size_t size);
/* Sets a knob by its environment name (RVGL_EMU_FAIL, RVGL_EMU_JOB_LATENCY_US, ...). Returns 0,
 * -EINVAL for a bad value, -ENOENT for an unknown name, -EBUSY for a structural knob
 * (PROFILE, DEVICES, XCCS, VRAM_MB, GTT_MB, DRM_MINOR, STATE_DIR) while any emulated fd is open. */
int rvgl_emu_set_knob(const char *name, const char *value);
/* Drops RVGL_EMU_FAIL rules and call counts, and the hang/reset/fault-VA knobs; stops counting. */
void rvgl_emu_reset_fault_injection(void);
/* Counts calls per name from zero, as RVGL_EMU_FAIL rules do, with none failing, until
 * rvgl_emu_reset_fault_injection(); new rules start the counts from zero again. */
void rvgl_emu_count_calls(void);
/* The calls counted since the rules were set or rvgl_emu_count_calls(), of every thread, per name
 * RVGL_EMU_FAIL takes (ioctl names, OPEN, MMAP, UDMABUF_CREATE, ...): "NAME COUNT" lines sorted
 * by name, written into buf NUL-terminated (cut at size - 1). Returns the whole text's length. */
size_t rvgl_emu_call_counts(char *buf, size_t size);
/* As rvgl_emu_call_counts(), the calls of the thread that called rvgl_emu_count_calls() only (none
 * after rvgl_emu_reset_fault_injection()): a test's own calls, which come in program order, apart
 * from those of the threads it started or the library runs. */
size_t rvgl_emu_counting_thread_call_counts(char *buf, size_t size);
/* Writes the counters to <state dir>/counters-<pid>.txt ("name value" lines, written atomically)
 * and copies that path into path_out if given. Returns 0 or -errno. */
int rvgl_emu_write_counters_file(char *path_out, size_t path_size);
/* The state directory in use (lock files, the fake tree, counters files). */
const char *rvgl_emu_state_dir(void);

#ifdef __cplusplus
}
#endif

#endif /* RVGL_EMU_H */
