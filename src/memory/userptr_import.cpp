#include "memory/userptr_import.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <map>
#include <vector>

#include "amdgpu/udmabuf.h"
#include "memory/host_file_ranges.h"
#include "rocm_virgl_protocol.h"
#include "util/checked_math.h"

namespace rvgl {

namespace {

constexpr uint64_t kPage = 4096;

using Range = MemoryObject::GuestRange;

// Closes handles on the error paths until ownership moves into a MemoryObject.
class HandleGuard {
 public:
  explicit HandleGuard(AmdgpuDevice &dev) : dev_(dev) {}
  ~HandleGuard() {
    for (const auto &s : segs_)
      dev_.gem_close(s.handle);
  }
  // Room for `n` handles, asked before the first is made: add() then allocates nothing, so a
  // handle just made always reaches the guard.
  void reserve(size_t n) { segs_.reserve(n); }
  void add(uint32_t handle, uint64_t size, void *host = nullptr) {
    segs_.push_back({handle, size, host});
  }
  std::vector<MemoryObject::Segment> release() { return std::move(segs_); }
  size_t count() const { return segs_.size(); }

 private:
  AmdgpuDevice &dev_;
  std::vector<MemoryObject::Segment> segs_;
};

uint32_t userptr_flags(bool read_only) {
  // REGISTER (MMU notifier) is what makes a writable userptr legal; no ANONONLY: guest RAM is
  // usually file-backed (memfd), which ANONONLY would refuse.
  return AMDGPU_GEM_USERPTR_REGISTER | AMDGPU_GEM_USERPTR_VALIDATE |
         (read_only ? AMDGPU_GEM_USERPTR_READONLY : 0u);
}

// Two passes over the iovecs: the first validates and counts the ranges, so the second fills a
// vector of exactly that size (one allocation, later moved into the object, never copied).
int coalesce(std::span<const iovec> iov, std::vector<Range> *out, uint64_t *total) {
  if (iov.empty()) return -EINVAL;
  uint64_t sum = 0, count = 0, prev_end = 0;
  for (const auto &v : iov) {
    const auto addr = reinterpret_cast<uint64_t>(v.iov_base);
    if (v.iov_len == 0 || !is_aligned(addr, kPage) || !is_aligned(v.iov_len, kPage)) return -EINVAL;
    auto s = checked_add(sum, v.iov_len);
    auto e = checked_add(addr, v.iov_len);
    if (!s || !e) return -EINVAL;
    sum = *s;
    if (count == 0 || prev_end != addr) ++count;
    prev_end = *e;
  }
  out->reserve(count);
  *total = sum;
  if (count == 1) {  // in order: no second pass
    out->push_back({reinterpret_cast<uint64_t>(iov[0].iov_base), sum});
    return 0;
  }
  for (const auto &v : iov) {
    const auto addr = reinterpret_cast<uint64_t>(v.iov_base);
    if (!out->empty() && out->back().addr + out->back().size == addr)
      out->back().size += v.iov_len;
    else
      out->push_back({addr, v.iov_len});
  }
  return 0;
}

int import_stitched(const std::shared_ptr<AmdgpuDevice> &dev, const std::vector<Range> &ranges,
                    bool ro, std::shared_ptr<MemoryObject> *out) {
  HandleGuard guard(*dev);
  guard.reserve(ranges.size());
  for (const auto &r : ranges) {
    uint32_t h;
    int err = dev->gem_userptr(reinterpret_cast<void *>(r.addr), r.size, userptr_flags(ro), &h);
    if (err) return err;
    guard.add(h, r.size, reinterpret_cast<void *>(r.addr));
  }
  *out = MemoryObject::adopt(dev, MemoryObject::Kind::kUserptr, 0, guard.release(), ro);
  return 0;
}

using FileFds = std::map<std::pair<dev_t, ino_t>, UniqueFd>;

// The fd of each piece's file; pieces of one guest-RAM memfd follow each other, so the last
// answer is kept instead of a map lookup per piece.
class FdOfPiece {
 public:
  explicit FdOfPiece(const FileFds &fds) : fds_(fds) {}
  int operator()(const FilePiece &p) {
    if (fd_ < 0 || p.dev != dev_ || p.ino != ino_) {
      auto it = fds_.find({p.dev, p.ino});
      fd_ = it == fds_.end() ? -1 : it->second.get();
      dev_ = p.dev;
      ino_ = p.ino;
    }
    return fd_;
  }

 private:
  const FileFds &fds_;
  int fd_ = -1;
  dev_t dev_ = 0;
  ino_t ino_ = 0;
};

// Splits pieces into udmabuf items within the item and size limits, in order: split() calls
// item(file_offset, len, fresh) per item, fresh meaning the item starts the next udmabuf.
class UdmabufPacker {
 public:
  explicit UdmabufPacker(const UserptrOptions &opt) : opt_(opt) {}
  template <class Fn>
  void split(const FilePiece &p, Fn &&item) {
    for (uint64_t done = 0; done < p.size;) {
      uint64_t len = std::min(p.size - done, opt_.udmabuf_max_bytes);
      const bool fresh =
          items_ > 0 && (items_ >= opt_.udmabuf_max_items || bytes_ + len > opt_.udmabuf_max_bytes);
      if (fresh) items_ = bytes_ = 0;
      if (items_ == 0) ++buffers_;
      len = std::min(len, opt_.udmabuf_max_bytes - bytes_);
      item(p.offset + done, len, fresh);
      ++items_;
      bytes_ += len;
      done += len;
    }
  }
  uint64_t buffers() const { return buffers_; }

 private:
  const UserptrOptions &opt_;
  uint64_t items_ = 0, bytes_ = 0, buffers_ = 0;
};

// What the file pieces behind the ranges need, found in one pass that stores none of them (a
// shuffled 64 MiB blob has 16384): their number, an fd per distinct file, and the number of
// udmabufs they would make. False if some part is not a shared file mapping or a file has no fd
// in this process, or, for a writable blob, if the VMM mapped some part read-only: the file's fd
// would let the GPU write there (an alias maps it writable, a udmabuf takes the file's pages),
// where the kernel refuses a writable userptr of the VMM's own mapping (the stitched import's
// -EPERM: hmm_range_fault() asked for write access to a VMA without VM_WRITE).
struct Survey {
  uint64_t pieces = 0;
  uint64_t udmabufs = 0;
  FileFds fds;
};

bool survey(HostFileRanges &maps, const std::vector<Range> &ranges, bool read_only,
            const UserptrOptions &opt, Survey *out) {
  UdmabufPacker packer(opt);
  bool have_last = false, found = true;
  dev_t last_dev = 0;
  ino_t last_ino = 0;
  for (const auto &r : ranges) {
    const bool ok = maps.for_each_piece(r.addr, r.size, [&](const FilePiece &p) {
      if (!read_only && !p.writable) found = false;
      ++out->pieces;
      packer.split(p, [](uint64_t, uint64_t, bool) {});
      if (have_last && p.dev == last_dev && p.ino == last_ino) return;
      have_last = true;
      last_dev = p.dev;
      last_ino = p.ino;
      auto key = std::make_pair(p.dev, p.ino);
      if (!found || out->fds.count(key)) return;
      UniqueFd fd = HostFileRanges::find_fd(p.dev, p.ino);
      if (!fd)
        found = false;
      else
        out->fds.emplace(key, std::move(fd));
    });
    if (!ok || !found) return false;
  }
  out->udmabufs = packer.buffers();
  return true;
}

// The pieces are resolved again from the VMAs the survey found (the same view, so the same
// pieces); a piece that would not match the survey (no fd for its file, more bytes or udmabufs
// than counted) fails the import with -EFAULT rather than being trusted.
int import_alias(const std::shared_ptr<AmdgpuDevice> &dev, HostFileRanges &maps,
                 const std::vector<Range> &ranges, const FileFds &fds, uint64_t total, bool ro,
                 std::shared_ptr<MemoryObject> *out) {
  void *base = mmap(nullptr, total, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base == MAP_FAILED) return -ENOMEM;
  Mapping alias(base, total);
  const int prot = ro ? PROT_READ : PROT_READ | PROT_WRITE;
  uint64_t pos = 0;
  int err = 0;
  FdOfPiece fd_of(fds);
  for (const auto &r : ranges) {
    const bool ok = maps.for_each_piece(r.addr, r.size, [&](const FilePiece &p) {
      const int fd = fd_of(p);
      if (err || pos + p.size > total) {
        err = err ? err : -EFAULT;
        return;
      }
      if (fd < 0) {
        err = -EFAULT;
        return;
      }
      void *at = static_cast<uint8_t *>(base) + pos;
      if (mmap(at, p.size, prot, MAP_SHARED | MAP_FIXED, fd, static_cast<off_t>(p.offset)) ==
          MAP_FAILED)
        err = -errno;
      pos += p.size;
    });
    if (!ok) return -EFAULT;
    if (err) return err;
  }
  if (pos != total) return -EFAULT;
  uint32_t h;
  if ((err = dev->gem_userptr(base, total, userptr_flags(ro), &h))) return err;
  auto obj = MemoryObject::adopt_one(dev, MemoryObject::Kind::kUserptr, 0, {h, total, base}, ro);
  obj->keep_alive(std::move(alias));
  *out = std::move(obj);
  return 0;
}

// Each udmabuf's list is built in one reused buffer and imported before the next is built: no
// per-page allocation, and one CREATE_LIST plus one PRIME import per udmabuf.
int import_udmabuf(const std::shared_ptr<AmdgpuDevice> &dev, HostFileRanges &maps,
                   const std::vector<Range> &ranges, const Survey &sv, bool ro,
                   const UserptrOptions &opt, std::shared_ptr<MemoryObject> *out) {
  if (sv.udmabufs == 0 || opt.udmabuf_max_items == 0 || opt.udmabuf_max_bytes < kPage)
    return -EINVAL;
  if (sv.udmabufs > opt.max_objects) return -ENOSPC;
  int err;
  const Udmabuf udev = Udmabuf::open(&err);
  if (err) return err;

  HandleGuard guard(*dev);
  guard.reserve(sv.udmabufs);
  uint64_t made = 0;
  UdmabufList list(static_cast<uint32_t>(std::min<uint64_t>(opt.udmabuf_max_items, UINT32_MAX)));
  auto flush = [&]() -> int {
    // Never more udmabufs than the survey counted (and the quota allowed).
    if (made >= sv.udmabufs) return -EFAULT;
    UniqueFd buf;
    if (int e = udev.create(list, &buf)) return e;
    uint32_t h;
    if (int e = dev->prime_import(buf.get(), &h)) return e;
    // The import holds the dma-buf (drm_gem_prime_import() takes its own reference through the
    // attachment), so its fd closes here: a blob of scattered pages costs the VMM no descriptor,
    // and closing the handle (revoke) releases the pages.
    guard.add(h, list.bytes());
    ++made;
    list.clear();
    return 0;
  };
  UdmabufPacker packer(opt);
  FdOfPiece fd_of(sv.fds);
  err = 0;
  for (const auto &r : ranges) {
    const bool ok = maps.for_each_piece(r.addr, r.size, [&](const FilePiece &p) {
      const int fd = fd_of(p);
      packer.split(p, [&](uint64_t off, uint64_t len, bool fresh) {
        if (!err && fresh) err = flush();
        if (!err && !list.add(fd, off, len)) err = -EFAULT;  // fd < 0: a file not surveyed
      });
    });
    if (!ok) return -EFAULT;
    if (err) return err;
  }
  if ((err = flush())) return err;
  *out = MemoryObject::adopt(dev, MemoryObject::Kind::kUserptr, 0, guard.release(), ro);
  return 0;
}

}  // namespace

const char *userptr_strategy_name(UserptrStrategy s) {
  switch (s) {
    case UserptrStrategy::kStitched:
      return "stitched";
    case UserptrStrategy::kAlias:
      return "alias";
    case UserptrStrategy::kUdmabuf:
      return "udmabuf";
  }
  return "?";
}

UserptrStrategy choose_file_import(uint64_t pieces, uint64_t bytes, bool alias_ok, bool udmabuf_ok,
                                   const UserptrOptions &opt) {
  if (!alias_ok && !udmabuf_ok) return UserptrStrategy::kStitched;
  if (!alias_ok) return UserptrStrategy::kUdmabuf;
  if (!udmabuf_ok) return UserptrStrategy::kAlias;
  // Pages are 4 KiB; every piece makes at least one item, and items are grouped within limits.
  const double pages = static_cast<double>(bytes / kPage);
  const double by_items = static_cast<double>((pieces + opt.udmabuf_max_items - 1) /
                                              std::max<uint64_t>(1, opt.udmabuf_max_items));
  const double by_bytes = static_cast<double>((bytes + opt.udmabuf_max_bytes - 1) /
                                              std::max<uint64_t>(1, opt.udmabuf_max_bytes));
  const double buffers = std::max(by_items, by_bytes);
  const double alias = static_cast<double>(pieces) * opt.costs.alias_per_piece_ns;
  const double udmabuf =
      pages * opt.costs.udmabuf_per_page_ns + buffers * opt.costs.udmabuf_per_buffer_ns;
  // udmabuf makes one kernel object per buffer, the alias one in all.
  if (buffers > opt.max_objects) return UserptrStrategy::kAlias;
  return udmabuf < alias ? UserptrStrategy::kUdmabuf : UserptrStrategy::kAlias;
}

int import_userptr(const std::shared_ptr<AmdgpuDevice> &dev, std::span<const iovec> iov,
                   bool read_only, const UserptrOptions &opt, UserptrResult *out) {
  std::vector<Range> ranges;
  uint64_t total = 0;
  if (int err = coalesce(iov, &ranges, &total)) return err;
  out->ranges = static_cast<uint32_t>(ranges.size());

  if (ranges.size() > opt.stitch_max_ranges && (opt.allow_alias || opt.allow_udmabuf)) {
    auto maps = HostFileRanges::open();
    Survey sv;
    if (maps && survey(*maps, ranges, read_only, opt, &sv)) {
      out->pieces = static_cast<uint32_t>(std::min<uint64_t>(sv.pieces, UINT32_MAX));
      bool udmabuf_ok = opt.allow_udmabuf;
      for (auto it = sv.fds.begin(); udmabuf_ok && it != sv.fds.end(); ++it)
        udmabuf_ok = udmabuf_accepts(it->second.get());
      // The alias needs one VMA per piece, within half of the map-count budget (the rest is the
      // VMM's). Counting the process's VMAs reads all of /proc/self/maps, so it is asked only
      // once the alias is the candidate; the choice is the same as with the count known first.
      bool alias_ok = opt.allow_alias, alias_counted = false;
      auto alias_fits = [&] {
        if (!alias_counted && alias_ok) {
          const uint64_t budget = max_map_count() / 2;
          alias_ok =
              sv.pieces + 1 < budget && HostFileRanges::mapping_count() + sv.pieces + 1 < budget;
        }
        alias_counted = true;
        return alias_ok;
      };
      UserptrStrategy first = choose_file_import(sv.pieces, total, alias_ok, udmabuf_ok, opt);
      if (first == UserptrStrategy::kAlias && !alias_fits())
        first = choose_file_import(sv.pieces, total, false, udmabuf_ok, opt);
      // The cheaper first; the other if the first fails (e.g. no /dev/udmabuf).
      for (int attempt = 0; attempt < 2 && first != UserptrStrategy::kStitched; ++attempt) {
        const bool alias = first == UserptrStrategy::kAlias;
        if (alias ? alias_fits() : udmabuf_ok) {
          const int err =
              alias ? import_alias(dev, *maps, ranges, sv.fds, total, read_only, &out->object)
                    : import_udmabuf(dev, *maps, ranges, sv, read_only, opt, &out->object);
          if (err == 0) {
            out->strategy = first;
            break;
          }
        }
        first = alias ? UserptrStrategy::kUdmabuf : UserptrStrategy::kAlias;
      }
      if (out->object) {
        out->object->set_guest_ranges(std::move(ranges));
        return 0;
      }
    }
  }
  if (ranges.size() > opt.max_objects) return -ENOSPC;
  out->strategy = UserptrStrategy::kStitched;
  if (int err = import_stitched(dev, ranges, read_only, &out->object))
    // A writable blob over pages the VMM mapped read-only: -EPERM from kernels since 5.7
    // (hmm_vma_fault()), -EFAULT before; the guest is told -EFAULT either way (PROTOCOL.md §3),
    // as the file imports tell it (survey()). No other cause gives -EPERM without ANONONLY.
    return err == -EPERM ? -EFAULT : err;
  out->object->set_guest_ranges(std::move(ranges));
  return 0;
}

}  // namespace rvgl
