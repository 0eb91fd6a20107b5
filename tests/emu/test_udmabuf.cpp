// Acceptance: /dev/udmabuf with the kernel's checks, and its dma-bufs imported by amdgpu with no
// copy.
#include <linux/udmabuf.h>
#include <sys/mman.h>

#include <catch2/catch.hpp>

#include "emu_test_support.h"

using namespace rvgl::emu_test;

namespace {

Fd sealed_memfd(size_t size, unsigned seals = F_SEAL_SHRINK) {
  Fd fd(memfd_create("guest-ram", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  REQUIRE(fd.get() >= 0);
  REQUIRE(ftruncate(fd.get(), static_cast<off_t>(size)) == 0);
  if (seals) REQUIRE(fcntl(fd.get(), F_ADD_SEALS, seals) == 0);
  return fd;
}

int create_one(int dev, int memfd, uint64_t offset, uint64_t size) {
  udmabuf_create c{};
  c.memfd = static_cast<uint32_t>(memfd);
  c.flags = UDMABUF_FLAGS_CLOEXEC;
  c.offset = offset;
  c.size = size;
  return xioctl(dev, UDMABUF_CREATE, &c);
}

int create_list(int dev, int memfd, uint32_t count, uint64_t piece) {
  std::vector<uint8_t> buf(sizeof(udmabuf_create_list) + count * sizeof(udmabuf_create_item));
  auto *l = reinterpret_cast<udmabuf_create_list *>(buf.data());
  l->flags = UDMABUF_FLAGS_CLOEXEC;
  l->count = count;
  for (uint32_t i = 0; i < count; ++i) {
    // Every other page, backwards: scattered pieces of one file.
    l->list[i].memfd = static_cast<uint32_t>(memfd);
    l->list[i].offset = (count - 1 - i) * 2 * piece;
    l->list[i].size = piece;
  }
  return xioctl(dev, UDMABUF_CREATE_LIST, l);
}

}  // namespace

TEST_CASE("udmabuf refuses what the kernel refuses", "[udmabuf][acceptance]") {
  Fd dev(open("/dev/udmabuf", O_RDWR | O_CLOEXEC));
  REQUIRE(dev.get() >= 0);
  SECTION("a memfd that is not shrink-sealed") {
    Fd plain(memfd_create("plain", MFD_CLOEXEC));  // sealing not even allowed
    REQUIRE(ftruncate(plain.get(), 8192) == 0);
    CHECK(create_one(dev.get(), plain.get(), 0, 8192) == -EINVAL);
    Fd unsealed = sealed_memfd(8192, 0);
    CHECK(create_one(dev.get(), unsealed.get(), 0, 8192) == -EINVAL);
    Fd write_sealed = sealed_memfd(8192, F_SEAL_SHRINK | F_SEAL_WRITE);
    CHECK(create_one(dev.get(), write_sealed.get(), 0, 8192) == -EINVAL);
  }
  SECTION("a file that is not a memfd, and no file at all") {
    char path[] = "/tmp/rvgl-emu-udmabuf-XXXXXX";
    Fd tmp(mkstemp(path));
    unlink(path);
    REQUIRE(ftruncate(tmp.get(), 8192) == 0);
    CHECK(create_one(dev.get(), tmp.get(), 0, 8192) == -EBADFD);
    CHECK(create_one(dev.get(), 1000, 0, 8192) == -EBADF);
  }
  SECTION("unaligned, empty or out-of-file ranges") {
    Fd m = sealed_memfd(16384);
    CHECK(create_one(dev.get(), m.get(), 100, 4096) == -EINVAL);
    CHECK(create_one(dev.get(), m.get(), 0, 4000) == -EINVAL);
    CHECK(create_one(dev.get(), m.get(), 0, 0) == -EINVAL);
    CHECK(create_one(dev.get(), m.get(), 8192, 16384) == -EINVAL);
  }
  SECTION("more items than list_limit, or more bytes than size_limit_mb") {
    Fd m = sealed_memfd(2 * 1025 * 4096);
    CHECK(create_list(dev.get(), m.get(), 1025, 4096) == -EINVAL);
    const int ok = create_list(dev.get(), m.get(), 1024, 4096);
    CHECK(ok >= 0);
    if (ok >= 0) close(ok);
    Knob limit("RVGL_EMU_UDMABUF_SIZE_LIMIT_MB", "1", "64");
    Fd big = sealed_memfd(2 << 20);
    CHECK(create_one(dev.get(), big.get(), 0, 2 << 20) == -EINVAL);
  }
  SECTION("the modelled pinning cost is a knob within bounds, and changes no result") {
    CHECK(rvgl_emu_set_knob("RVGL_EMU_UDMABUF_PAGE_NS", "1000001") == -EINVAL);
    CHECK(rvgl_emu_set_knob("RVGL_EMU_UDMABUF_PAGE_NS", "x") == -EINVAL);
    Knob pin("RVGL_EMU_UDMABUF_PAGE_NS", "100", "60");
    REQUIRE(pin.rc() == 0);
    Fd m = sealed_memfd(32 * 4096);  // create_list takes every other page
    const int ok = create_list(dev.get(), m.get(), 16, 4096);
    REQUIRE(ok >= 0);
    CHECK(lseek(ok, 0, SEEK_END) == 16 * 4096);
    close(ok);
    CHECK(create_one(dev.get(), m.get(), 100, 4096) == -EINVAL);  // checks come first
  }
  SECTION("unknown flags and unknown ioctls") {
    Fd m = sealed_memfd(8192);
    udmabuf_create c{static_cast<uint32_t>(m.get()), 0x80, 0, 8192};
    CHECK(xioctl(dev.get(), UDMABUF_CREATE, &c) == -EINVAL);
    CHECK(xioctl(dev.get(), _IO('u', 0x99), nullptr) == -ENOTTY);
  }
}

TEST_CASE("an amdgpu node imports a udmabuf and the GPU writes the memfd's pages",
          "[udmabuf][acceptance]") {
  constexpr size_t kPiece = 4096;
  constexpr uint32_t kCount = 8;
  Fd dev(open("/dev/udmabuf", O_RDWR | O_CLOEXEC));
  Fd ram = sealed_memfd(2 * kCount * kPiece);
  auto *guest = static_cast<uint8_t *>(
      mmap(nullptr, 2 * kCount * kPiece, PROT_READ | PROT_WRITE, MAP_SHARED, ram.get(), 0));
  REQUIRE(guest != MAP_FAILED);
  const auto before = counters();
  Fd buf(create_list(dev.get(), ram.get(), kCount, kPiece));
  REQUIRE(buf.get() >= 0);
  CHECK(lseek(buf.get(), 0, SEEK_END) == static_cast<off_t>(kCount * kPiece));
  CHECK(counters().udmabufs_alive == before.udmabufs_alive + 1);

  Fd gpu = open_render();
  drm_prime_handle p{};
  p.fd = buf.get();
  REQUIRE(xioctl(gpu.get(), DRM_IOCTL_PRIME_FD_TO_HANDLE, &p) == 0);
  const uint32_t h = p.handle;
  constexpr uint64_t kVa = 0x5000000;
  REQUIRE(gem_va(gpu.get(), AMDGPU_VA_OP_MAP, h, kVa, 0, kCount * kPiece) == 0);
  GpuBuffer ibbuf;
  REQUIRE(ibbuf.create(gpu.get(), 4096, 0x6000000) == 0);
  uint32_t ctx = 0;
  REQUIRE(ctx_create(gpu.get(), &ctx) == 0);
  std::vector<uint32_t> ib;
  for (uint32_t i = 0; i < kCount; ++i)
    sdma::const_fill(ib, kVa + i * kPiece, 0x01010101u * (i + 1), kPiece);
  uint64_t seq;
  REQUIRE(submit(gpu.get(), ctx, AMDGPU_HW_IP_DMA, 0, place_ib(ibbuf, 0, ib), ib.size() * 4,
                 &seq) == 0);
  REQUIRE(wait_cs(gpu.get(), ctx, AMDGPU_HW_IP_DMA, 0, seq, abs_timeout_ms(5000)) == 0);
  // Piece i of the udmabuf is memfd page (count-1-i)*2: the fill landed there, in place.
  for (uint32_t i = 0; i < kCount; ++i) {
    const uint8_t *page = guest + (kCount - 1 - i) * 2 * kPiece;
    CHECK(page[0] == i + 1);
    CHECK(page[kPiece - 1] == i + 1);
    CHECK(guest[((kCount - 1 - i) * 2 + 1) * kPiece] == 0);  // the pages between untouched
  }
  // The udmabuf fd maps the same pieces in the same order.
  auto *view =
      static_cast<uint8_t *>(mmap(nullptr, kCount * kPiece, PROT_READ, MAP_SHARED, buf.get(), 0));
  REQUIRE(view != MAP_FAILED);
  CHECK(view[0] == 1);
  CHECK(view[(kCount - 1) * kPiece] == kCount);
  munmap(view, kCount * kPiece);
  // Importing it again in the same file gives the same handle; re-exporting gives a udmabuf fd.
  drm_prime_handle again{};
  again.fd = buf.get();
  REQUIRE(xioctl(gpu.get(), DRM_IOCTL_PRIME_FD_TO_HANDLE, &again) == 0);
  CHECK(again.handle == h);
  drm_prime_handle out{};
  out.handle = h;
  out.flags = DRM_CLOEXEC | DRM_RDWR;
  REQUIRE(xioctl(gpu.get(), DRM_IOCTL_PRIME_HANDLE_TO_FD, &out) == 0);
  Fd re(out.fd);
  CHECK(lseek(re.get(), 0, SEEK_END) == static_cast<off_t>(kCount * kPiece));
  munmap(guest, 2 * kCount * kPiece);
  gem_close(gpu.get(), h);
  buf.reset();
  re.reset();
  CHECK(counters().udmabufs_alive == before.udmabufs_alive);
}
