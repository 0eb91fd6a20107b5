// The pages behind a GPU object. VRAM/GTT/doorbell objects own a memfd (so a dma-buf export is the
// same pages, and lseek(SEEK_END) gives the size); udmabuf imports stitch pieces of the caller's
// memfds together; userptr objects are the caller's own pages, reached through checked copies so a
// page the caller unmapped faults instead of crashing the process.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "util/unique_fd.h"

namespace rvgl::emu {

class Backing {
 public:
  enum class Kind { Memfd, Segments, Userptr };
  virtual ~Backing() = default;
  Backing(const Backing &) = delete;
  Backing &operator=(const Backing &) = delete;

  Kind kind() const { return kind_; }
  uint64_t size() const { return size_; }

  // The emulator's own mapping of the whole object, or null when there is none (userptr).
  virtual uint8_t *view() = 0;
  // The caller address of byte 0 (userptr only).
  virtual uint64_t user_address() const { return 0; }
  // Whether the GPU may not write (read-only userptr).
  virtual bool gpu_readonly() const { return false; }

  // GPU-side accesses; false when the pages are gone (a userptr whose mapping was removed).
  bool read(uint64_t offset, void *dst, uint64_t len);
  bool write(uint64_t offset, const void *src, uint64_t len);
  // A fence write (AMDGPU_FENCE_FLAG_64BIT): one 64-bit store, never seen torn by a CPU reader.
  bool write_fence(uint64_t offset, uint64_t value);

  // Maps [offset, offset+len) for the CPU as mmap(2) would. MAP_FAILED with errno on failure.
  virtual void *cpu_map(void *addr, size_t len, int prot, int flags, uint64_t offset) = 0;

  // The file a dma-buf export hands out (its pages are the object's), or -1.
  virtual int export_fd() const { return -1; }

 protected:
  Backing(Kind kind, uint64_t size) : kind_(kind), size_(size) {}

 private:
  Kind kind_;
  uint64_t size_;
};

class MemfdBacking final : public Backing {
 public:
  // Creates a memfd named `name` of `size` bytes; nullptr with errno on failure.
  static std::shared_ptr<MemfdBacking> create(const char *name, uint64_t size);
  // Wraps an existing memfd (a dma-buf that came back to us from elsewhere).
  static std::shared_ptr<MemfdBacking> adopt(UniqueFd fd, uint64_t size);
  ~MemfdBacking() override;

  uint8_t *view() override;
  void *cpu_map(void *addr, size_t len, int prot, int flags, uint64_t offset) override;
  int export_fd() const override { return fd_.get(); }

 private:
  MemfdBacking(UniqueFd fd, uint64_t size) : Backing(Kind::Memfd, size), fd_(std::move(fd)) {}
  UniqueFd fd_;
  std::once_flag view_once_;
  uint8_t *view_ = nullptr;
};

// Pieces of memfds laid end to end (what a udmabuf is).
class SegmentBacking final : public Backing {
 public:
  struct Segment {
    std::shared_ptr<UniqueFd> file;  // shared between segments of the same memfd
    uint64_t offset;
    uint64_t size;
  };
  static std::shared_ptr<SegmentBacking> create(std::vector<Segment> segments, UniqueFd handle);
  ~SegmentBacking() override;

  uint8_t *view() override;
  void *cpu_map(void *addr, size_t len, int prot, int flags, uint64_t offset) override;
  int export_fd() const override { return handle_.get(); }

 private:
  SegmentBacking(std::vector<Segment> segments, uint64_t size, UniqueFd handle)
      : Backing(Kind::Segments, size), segments_(std::move(segments)), handle_(std::move(handle)) {}
  // Maps the segments covering [offset, offset+len) at `at` (which is reserved), MAP_FIXED.
  bool map_range(uint8_t *at, uint64_t offset, uint64_t len, int prot);

  std::vector<Segment> segments_;
  UniqueFd handle_;  // the udmabuf file handed out on export
  std::once_flag view_once_;
  uint8_t *view_ = nullptr;
};

class UserptrBacking final : public Backing {
 public:
  UserptrBacking(uint64_t addr, uint64_t size, bool readonly, bool anon_only)
      : Backing(Kind::Userptr, size), addr_(addr), readonly_(readonly), anon_only_(anon_only) {}
  uint8_t *view() override { return nullptr; }
  uint64_t user_address() const override { return addr_; }
  bool gpu_readonly() const override { return readonly_; }
  void *cpu_map(void *, size_t, int, int, uint64_t) override;
  // The pages looked up again as a CS does for every userptr object it lists: 0, -EFAULT, -EPERM
  // (user_pages_error()).
  int get_user_pages() const;

 private:
  uint64_t addr_;
  bool readonly_;
  bool anon_only_;
};

}  // namespace rvgl::emu
