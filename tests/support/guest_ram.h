// Guest RAM as a VMM holds it (a memfd mapped shared), and userptr blobs over its pages.
#pragma once

#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <span>
#include <stdexcept>
#include <vector>

#include "support/context_harness.h"
#include "util/mapping.h"
#include "util/unique_fd.h"

namespace rvgl::test {

struct GuestPages {
  UniqueFd fd;
  Mapping map;
  size_t bytes = 0;
  // memfd: file-backed guest RAM (QEMU memory-backend-memfd); anonymous: private RAM.
  explicit GuestPages(size_t n, bool memfd = true) : bytes(n) {
    if (memfd) {
      fd.reset(memfd_create("guest-ram", MFD_CLOEXEC | MFD_ALLOW_SEALING));
      if (!fd || ftruncate(fd.get(), static_cast<off_t>(n)) != 0) throw std::runtime_error("memfd");
      map = Mapping::map_shared(fd.get(), n, PROT_READ | PROT_WRITE);
    } else {
      void *p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p != MAP_FAILED) map = Mapping(p, n);
    }
    if (!map.valid()) throw std::runtime_error("guest ram map");
  }
  uint8_t *ptr(size_t off = 0) const { return map.as<uint8_t>() + off; }
  void fill(uint8_t v) { std::memset(ptr(), v, bytes); }
  // Bytes of [0, bytes) that are not v.
  size_t differing(uint8_t v) const {
    size_t n = 0;
    for (size_t i = 0; i < bytes; ++i)
      n += ptr()[i] != v;
    return n;
  }
};

// A userptr GUEST blob over iov; returns the res id (result in *err).
inline uint32_t userptr_blob(ContextHarness &h, std::span<const iovec> iov, int *err,
                             bool read_only = false) {
  BlobArgs a;
  a.res_id = h.next_res_id();
  a.blob_mem = RVGL_BLOB_MEM_GUEST;
  a.blob_flags = RVGL_BLOB_FLAG_USERPTR | (read_only ? RVGL_BLOB_FLAG_USERPTR_RDONLY : 0u);
  for (const auto &v : iov)
    a.size += v.iov_len;
  a.iov = iov;
  BlobExport e;
  *err = h.ctx().create_blob(a, &e);
  return a.res_id;
}

inline uint32_t userptr_blob(ContextHarness &h, const GuestPages &g, int *err) {
  const iovec v{g.ptr(), g.bytes};
  return userptr_blob(h, std::span<const iovec>(&v, 1), err);
}

}  // namespace rvgl::test
