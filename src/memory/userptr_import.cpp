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
  for (const auto &r : ranges) {
    uint32_t h;
    int err = dev->gem_userptr(reinterpret_cast<void *>(r.addr), r.size, userptr_flags(ro), &h);
    if (err) return err;
    guard.add(h, r.size, reinterpret_cast<void *>(r.addr));
  }
  *out = std::make_shared<MemoryObject>(dev, MemoryObject::Kind::kUserptr, 0, guard.release(), ro);
  return 0;
}

using FileFds = std::map<std::pair<dev_t, ino_t>, UniqueFd>;

// One fd per distinct file behind the pieces; false if one cannot be found.
bool collect_fds(const std::vector<FilePiece> &pieces, FileFds *fds) {
  const FilePiece *last = nullptr;
  for (const auto &p : pieces) {
    if (last && last->dev == p.dev && last->ino == p.ino) continue;
    last = &p;
    auto key = std::make_pair(p.dev, p.ino);
    if (fds->count(key)) continue;
    UniqueFd fd = HostFileRanges::find_fd(p.dev, p.ino);
    if (!fd) return false;
    fds->emplace(key, std::move(fd));
  }
  return true;
}

// The fd of each piece's file; pieces of one guest-RAM memfd follow each other, so the last
// answer is kept instead of a map lookup per piece.
class FdOfPiece {
 public:
  explicit FdOfPiece(const FileFds &fds) : fds_(fds) {}
  int operator()(const FilePiece &p) {
    if (fd_ < 0 || p.dev != dev_ || p.ino != ino_) {
      fd_ = fds_.at({p.dev, p.ino}).get();
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

int import_alias(const std::shared_ptr<AmdgpuDevice> &dev, const std::vector<FilePiece> &pieces,
                 const FileFds &fds, uint64_t total, bool ro, std::shared_ptr<MemoryObject> *out) {
  void *base = mmap(nullptr, total, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base == MAP_FAILED) return -ENOMEM;
  Mapping alias(base, total);
  const int prot = ro ? PROT_READ : PROT_READ | PROT_WRITE;
  uint64_t pos = 0;
  FdOfPiece fd_of(fds);
  for (const auto &p : pieces) {
    const int fd = fd_of(p);
    void *at = static_cast<uint8_t *>(base) + pos;
    if (mmap(at, p.size, prot, MAP_SHARED | MAP_FIXED, fd, static_cast<off_t>(p.offset)) ==
        MAP_FAILED)
      return -errno;
    pos += p.size;
  }
  uint32_t h;
  int err = dev->gem_userptr(base, total, userptr_flags(ro), &h);
  if (err) return err;
  auto obj =
      std::make_shared<MemoryObject>(dev, MemoryObject::Kind::kUserptr, 0,
                                     std::vector<MemoryObject::Segment>{{h, total, base}}, ro);
  obj->keep_alive(std::move(alias));
  *out = std::move(obj);
  return 0;
}

// Splits the pieces into udmabuf items within the item and size limits, in order, calling
// item(piece, file_offset, len, fresh) for each; fresh: the item starts the next udmabuf.
template <class Fn>
void for_each_udmabuf_item(const std::vector<FilePiece> &pieces, const UserptrOptions &opt,
                           Fn &&item) {
  uint64_t items = 0, bytes = 0;
  for (const auto &p : pieces) {
    for (uint64_t done = 0; done < p.size;) {
      uint64_t len = std::min(p.size - done, opt.udmabuf_max_bytes);
      const bool fresh =
          items > 0 && (items >= opt.udmabuf_max_items || bytes + len > opt.udmabuf_max_bytes);
      if (fresh) items = bytes = 0;
      len = std::min(len, opt.udmabuf_max_bytes - bytes);
      item(p, p.offset + done, len, fresh);
      ++items;
      bytes += len;
      done += len;
    }
  }
}

// Each udmabuf's list is built in one reused buffer and imported before the next is built: no
// per-page allocation, and one CREATE_LIST plus one PRIME import per udmabuf.
int import_udmabuf(const std::shared_ptr<AmdgpuDevice> &dev, const std::vector<FilePiece> &pieces,
                   const FileFds &fds, bool ro, const UserptrOptions &opt,
                   std::shared_ptr<MemoryObject> *out) {
  if (pieces.empty() || opt.udmabuf_max_items == 0 || opt.udmabuf_max_bytes < kPage) return -EINVAL;
  uint64_t buffers = 1;
  for_each_udmabuf_item(pieces, opt, [&](const FilePiece &, uint64_t, uint64_t, bool fresh) {
    buffers += fresh ? 1 : 0;
  });
  if (buffers > opt.max_objects) return -ENOSPC;
  int err;
  const Udmabuf udev = Udmabuf::open(&err);
  if (err) return err;

  HandleGuard guard(*dev);
  std::vector<UniqueFd> bufs;
  bufs.reserve(buffers);
  UdmabufList list(static_cast<uint32_t>(std::min<uint64_t>(opt.udmabuf_max_items, UINT32_MAX)));
  auto flush = [&]() -> int {
    UniqueFd buf;
    if (int e = udev.create(list, &buf)) return e;
    uint32_t h;
    if (int e = dev->prime_import(buf.get(), &h)) return e;
    guard.add(h, list.bytes());
    bufs.push_back(std::move(buf));
    list.clear();
    return 0;
  };
  FdOfPiece fd_of(fds);
  err = 0;
  for_each_udmabuf_item(pieces, opt,
                        [&](const FilePiece &p, uint64_t off, uint64_t len, bool fresh) {
                          if (!err && fresh) err = flush();
                          if (!err && !list.add(fd_of(p), off, len)) err = -EBADF;
                        });
  if (!err) err = flush();
  if (err) return err;
  auto obj =
      std::make_shared<MemoryObject>(dev, MemoryObject::Kind::kUserptr, 0, guard.release(), ro);
  for (auto &b : bufs)
    obj->keep_alive(std::move(b));
  *out = std::move(obj);
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
    std::vector<FilePiece> pieces;
    pieces.reserve(ranges.size());  // at least one piece per range, usually exactly one
    bool file_backed = maps.has_value();
    for (size_t i = 0; file_backed && i < ranges.size(); ++i)
      file_backed = maps->resolve(ranges[i].addr, ranges[i].size, &pieces);
    FileFds fds;
    if (file_backed && collect_fds(pieces, &fds)) {
      out->pieces = static_cast<uint32_t>(pieces.size());
      bool udmabuf_ok = opt.allow_udmabuf;
      for (auto it = fds.begin(); udmabuf_ok && it != fds.end(); ++it)
        udmabuf_ok = udmabuf_accepts(it->second.get());
      // The alias needs one VMA per piece, within half of the map-count budget (the rest is the
      // VMM's). Counting the process's VMAs reads all of /proc/self/maps, so it is asked only
      // once the alias is the candidate; the choice is the same as with the count known first.
      bool alias_ok = opt.allow_alias, alias_counted = false;
      auto alias_fits = [&] {
        if (!alias_counted && alias_ok) {
          const uint64_t budget = max_map_count() / 2;
          alias_ok = pieces.size() + 1 < budget &&
                     HostFileRanges::mapping_count() + pieces.size() + 1 < budget;
        }
        alias_counted = true;
        return alias_ok;
      };
      UserptrStrategy first = choose_file_import(pieces.size(), total, alias_ok, udmabuf_ok, opt);
      if (first == UserptrStrategy::kAlias && !alias_fits())
        first = choose_file_import(pieces.size(), total, false, udmabuf_ok, opt);
      // The cheaper first; the other if the first fails (e.g. no /dev/udmabuf).
      for (int attempt = 0; attempt < 2 && first != UserptrStrategy::kStitched; ++attempt) {
        const bool alias = first == UserptrStrategy::kAlias;
        if (alias ? alias_fits() : udmabuf_ok) {
          const int err = alias ? import_alias(dev, pieces, fds, total, read_only, &out->object)
                                : import_udmabuf(dev, pieces, fds, read_only, opt, &out->object);
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
  if (int err = import_stitched(dev, ranges, read_only, &out->object)) return err;
  out->object->set_guest_ranges(std::move(ranges));
  return 0;
}

}  // namespace rvgl
