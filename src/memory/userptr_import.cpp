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

struct Range {
  uint64_t addr;
  uint64_t size;
};

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

int coalesce(std::span<const iovec> iov, std::vector<Range> *out, uint64_t *total) {
  if (iov.empty()) return -EINVAL;
  uint64_t sum = 0;
  for (const auto &v : iov) {
    const auto addr = reinterpret_cast<uint64_t>(v.iov_base);
    if (v.iov_len == 0 || !is_aligned(addr, kPage) || !is_aligned(v.iov_len, kPage)) return -EINVAL;
    auto s = checked_add(sum, v.iov_len);
    auto e = checked_add(addr, v.iov_len);
    if (!s || !e) return -EINVAL;
    sum = *s;
    if (!out->empty() && out->back().addr + out->back().size == addr)
      out->back().size += v.iov_len;
    else
      out->push_back({addr, v.iov_len});
  }
  *total = sum;
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

// The VMM's addresses of the blob's pages, for host writes into them (MemoryObject::write_guest).
void set_ranges(MemoryObject &obj, const std::vector<Range> &ranges) {
  std::vector<std::pair<uint64_t, uint64_t>> r;
  r.reserve(ranges.size());
  for (const auto &x : ranges)
    r.emplace_back(x.addr, x.size);
  obj.set_guest_ranges(std::move(r));
}

// One fd per distinct file behind the pieces; false if one cannot be found.
bool collect_fds(const std::vector<FilePiece> &pieces,
                 std::map<std::pair<dev_t, ino_t>, UniqueFd> *fds) {
  for (const auto &p : pieces) {
    auto key = std::make_pair(p.dev, p.ino);
    if (fds->count(key)) continue;
    UniqueFd fd = HostFileRanges::find_fd(p.dev, p.ino);
    if (!fd) return false;
    fds->emplace(key, std::move(fd));
  }
  return true;
}

int import_alias(const std::shared_ptr<AmdgpuDevice> &dev, const std::vector<FilePiece> &pieces,
                 std::map<std::pair<dev_t, ino_t>, UniqueFd> &fds, uint64_t total, bool ro,
                 std::shared_ptr<MemoryObject> *out) {
  void *base = mmap(nullptr, total, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base == MAP_FAILED) return -ENOMEM;
  Mapping alias(base, total);
  const int prot = ro ? PROT_READ : PROT_READ | PROT_WRITE;
  uint64_t pos = 0;
  for (const auto &p : pieces) {
    int fd = fds.at({p.dev, p.ino}).get();
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

// Groups pieces into udmabufs within the item and size limits.
std::vector<std::vector<UdmabufItem>> udmabuf_groups(
    const std::vector<FilePiece> &pieces, const std::map<std::pair<dev_t, ino_t>, UniqueFd> *fds,
    const UserptrOptions &opt) {
  std::vector<std::vector<UdmabufItem>> groups(1);
  uint64_t group_bytes = 0;
  for (const auto &p : pieces) {
    const int fd = fds ? fds->at({p.dev, p.ino}).get() : -1;
    for (uint64_t done = 0; done < p.size;) {
      uint64_t len = std::min(p.size - done, opt.udmabuf_max_bytes);
      if (groups.back().size() >= opt.udmabuf_max_items ||
          group_bytes + len > opt.udmabuf_max_bytes) {
        groups.emplace_back();
        group_bytes = 0;
      }
      len = std::min(len, opt.udmabuf_max_bytes - group_bytes);
      groups.back().push_back(UdmabufItem{fd, p.offset + done, len});
      group_bytes += len;
      done += len;
    }
  }
  return groups;
}

int import_udmabuf(const std::shared_ptr<AmdgpuDevice> &dev, const std::vector<FilePiece> &pieces,
                   std::map<std::pair<dev_t, ino_t>, UniqueFd> &fds, bool ro,
                   const UserptrOptions &opt, std::shared_ptr<MemoryObject> *out) {
  for (auto &[key, fd] : fds) {
    if (!udmabuf_accepts(fd.get())) return -EOPNOTSUPP;  // the kernel requires the seal
  }
  int err;
  const Udmabuf udev = Udmabuf::open(&err);
  if (err) return err;
  const auto groups = udmabuf_groups(pieces, &fds, opt);
  if (groups.size() > opt.max_objects) return -ENOSPC;

  HandleGuard guard(*dev);
  std::vector<UniqueFd> bufs;
  for (const auto &g : groups) {
    UniqueFd buf;
    if ((err = udev.create_list(g, &buf))) return err;
    uint32_t h;
    if ((err = dev->prime_import(buf.get(), &h))) return err;
    uint64_t bytes = 0;
    for (const auto &it : g)
      bytes += it.size;
    guard.add(h, bytes);
    bufs.push_back(std::move(buf));
  }
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
    auto maps = HostFileRanges::snapshot();
    std::vector<FilePiece> pieces;
    bool file_backed = maps.has_value();
    for (size_t i = 0; file_backed && i < ranges.size(); ++i)
      file_backed = maps->resolve(ranges[i].addr, ranges[i].size, &pieces);
    std::map<std::pair<dev_t, ino_t>, UniqueFd> fds;
    if (file_backed && collect_fds(pieces, &fds)) {
      out->pieces = static_cast<uint32_t>(pieces.size());
      // Leave most of the map-count budget to the VMM: an alias needs one VMA per piece.
      const uint64_t budget = max_map_count() / 2;
      const bool alias_ok = opt.allow_alias && maps->mapping_count() + pieces.size() + 1 < budget;
      bool udmabuf_ok = opt.allow_udmabuf;
      for (auto it = fds.begin(); udmabuf_ok && it != fds.end(); ++it)
        udmabuf_ok = udmabuf_accepts(it->second.get());
      UserptrStrategy first = choose_file_import(pieces.size(), total, alias_ok, udmabuf_ok, opt);
      // The cheaper first; the other if the first fails (e.g. no /dev/udmabuf).
      for (int attempt = 0; attempt < 2 && first != UserptrStrategy::kStitched; ++attempt) {
        const bool alias = first == UserptrStrategy::kAlias;
        if (alias ? alias_ok : udmabuf_ok) {
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
        set_ranges(*out->object, ranges);
        return 0;
      }
    }
  }
  if (ranges.size() > opt.max_objects) return -ENOSPC;
  out->strategy = UserptrStrategy::kStitched;
  if (int err = import_stitched(dev, ranges, read_only, &out->object)) return err;
  set_ranges(*out->object, ranges);
  return 0;
}

}  // namespace rvgl
