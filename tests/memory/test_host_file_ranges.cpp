#include <catch2/catch.hpp>

#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>

#include "memory/host_file_ranges.h"
#include "util/mapping.h"
#include "util/unique_fd.h"

using rvgl::FilePiece;
using rvgl::HostFileRanges;

TEST_CASE("file pieces behind shared memfd mappings are found with their fd", "[memory]") {
  const size_t page = 4096;
  rvgl::UniqueFd memfd(memfd_create("test-guest-ram", MFD_CLOEXEC));
  REQUIRE(memfd);
  REQUIRE(ftruncate(memfd.get(), 16 * page) == 0);
  auto ram = rvgl::Mapping::map_shared(memfd.get(), 16 * page, PROT_READ | PROT_WRITE);
  REQUIRE(ram.valid());
  auto anon = rvgl::Mapping(
      mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0), page);

  auto maps = HostFileRanges::open();
  REQUIRE(maps);
  std::vector<FilePiece> pieces;
  const auto base = reinterpret_cast<uint64_t>(ram.get());
  REQUIRE(maps->resolve(base + 3 * page, 2 * page, &pieces));
  REQUIRE(pieces.size() == 1);
  CHECK(pieces[0].offset == 3 * page);
  CHECK(pieces[0].size == 2 * page);

  struct stat st;
  REQUIRE(fstat(memfd.get(), &st) == 0);
  CHECK(pieces[0].ino == st.st_ino);
  auto fd = HostFileRanges::find_fd(pieces[0].dev, pieces[0].ino);
  REQUIRE(fd);
  struct stat st2;
  REQUIRE(fstat(fd.get(), &st2) == 0);
  CHECK(st2.st_ino == st.st_ino);

  std::vector<FilePiece> none;
  CHECK_FALSE(maps->resolve(reinterpret_cast<uint64_t>(anon.get()), page, &none));  // anonymous
  CHECK_FALSE(maps->resolve(base + 15 * page, 2 * page, &none));  // runs past the mapping
}

TEST_CASE("file pieces are the same whether the VMAs come from PROCMAP_QUERY or the text",
          "[memory]") {
  const size_t page = 4096;
  rvgl::UniqueFd a(memfd_create("test-ram-a", MFD_CLOEXEC)), b(memfd_create("test-ram-b", 0));
  REQUIRE(a);
  REQUIRE(b);
  REQUIRE(ftruncate(a.get(), 64 * page) == 0);
  REQUIRE(ftruncate(b.get(), 64 * page) == 0);
  // One reserved range: [a 0..8) [a 8..16) [b 0..8) [anonymous], so the first two mappings
  // continue each other (one piece), the third is another file, the fourth is refused.
  void *base = mmap(nullptr, 32 * page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(base != MAP_FAILED);
  rvgl::Mapping reserve(base, 32 * page);
  auto *p = static_cast<uint8_t *>(base);
  const int rw = PROT_READ | PROT_WRITE;
  REQUIRE(mmap(p, 8 * page, rw, MAP_SHARED | MAP_FIXED, a.get(), 0) == p);
  REQUIRE(mmap(p + 8 * page, 8 * page, PROT_READ, MAP_SHARED | MAP_FIXED, a.get(),
               8 * page) == p + 8 * page);  // another VMA (other protection), same file run
  REQUIRE(mmap(p + 16 * page, 8 * page, rw, MAP_SHARED | MAP_FIXED, b.get(), 0) == p + 16 * page);
  const auto at = reinterpret_cast<uint64_t>(p);

  for (auto source : {HostFileRanges::Source::kAny, HostFileRanges::Source::kTextOnly}) {
    auto maps = HostFileRanges::open(source);
    REQUIRE(maps);
    std::vector<FilePiece> pieces;
    // Scattered pages as a guest hands them over, then a run across the two VMAs of `a` and `b`.
    REQUIRE(maps->resolve(at + 5 * page, page, &pieces));
    REQUIRE(maps->resolve(at + 2 * page, page, &pieces));
    REQUIRE(maps->resolve(at + 6 * page, 14 * page, &pieces));
    REQUIRE(pieces.size() == 4);
    CHECK(pieces[0].offset == 5 * page);
    CHECK(pieces[1].offset == 2 * page);
    CHECK(pieces[2].offset == 6 * page);  // a 6..16, merged across the VMA boundary
    CHECK(pieces[2].size == 10 * page);
    CHECK(pieces[3].offset == 0);  // b 0..4
    CHECK(pieces[3].size == 4 * page);
    CHECK(pieces[2].ino == pieces[0].ino);
    CHECK(pieces[3].ino != pieces[0].ino);
    // Writable only where every VMA of the piece is: the read-only half of `a` makes its run so.
    CHECK(pieces[0].writable);
    CHECK(pieces[1].writable);
    CHECK_FALSE(pieces[2].writable);
    CHECK(pieces[3].writable);
    std::vector<FilePiece> ro;
    REQUIRE(maps->resolve(at + 10 * page, page, &ro));
    REQUIRE(ro.size() == 1);
    CHECK_FALSE(ro[0].writable);
    std::vector<FilePiece> none;
    CHECK_FALSE(maps->resolve(at + 20 * page, 8 * page, &none));  // runs into private memory
    CHECK_FALSE(maps->resolve(at + 24 * page, page, &none));
  }
}

TEST_CASE("the mapping count is the number of VMAs", "[memory]") {
  const size_t page = 4096;
  rvgl::UniqueFd fds[3] = {rvgl::UniqueFd(memfd_create("count-0", MFD_CLOEXEC)),
                           rvgl::UniqueFd(memfd_create("count-1", MFD_CLOEXEC)),
                           rvgl::UniqueFd(memfd_create("count-2", MFD_CLOEXEC))};
  for (auto &fd : fds)
    REQUIRE(ftruncate(fd.get(), page) == 0);
  const uint64_t before = HostFileRanges::mapping_count();
  std::vector<rvgl::Mapping> maps;
  for (auto &fd : fds)  // three files: never merged with anything
    maps.push_back(rvgl::Mapping::map_shared(fd.get(), page, PROT_READ));
  CHECK(HostFileRanges::mapping_count() == before + 3);
}

TEST_CASE("PROCMAP_QUERY answers the VMA covering an address", "[memory]") {
  const size_t page = 4096;
  rvgl::UniqueFd memfd(memfd_create("query-ram", MFD_CLOEXEC));
  REQUIRE(memfd);
  REQUIRE(ftruncate(memfd.get(), 8 * page) == 0);
  auto ram = rvgl::Mapping::map_shared(memfd.get(), 4 * page, PROT_READ, 4 * page);
  REQUIRE(ram.valid());
  auto q = rvgl::ProcmapQuery::open();
  REQUIRE(q.valid());
  const auto at = reinterpret_cast<uint64_t>(ram.get());
  rvgl::ProcVma v{};
  const int err = q.covering(at + 2 * page, &v);
  if (err == -ENOTTY) {
    WARN("this kernel predates PROCMAP_QUERY (Linux 6.11): only the text path is tested");
    return;
  }
  REQUIRE(err == 0);
  struct stat st;
  REQUIRE(fstat(memfd.get(), &st) == 0);
  CHECK(v.start == at);
  CHECK(v.end == at + 4 * page);
  CHECK(v.offset == 4 * page);
  CHECK(v.inode == st.st_ino);
  CHECK(makedev(v.dev_major, v.dev_minor) == st.st_dev);
  CHECK(v.shared);
  ram = rvgl::Mapping();  // unmapped now: nothing covers the address
  CHECK(q.covering(at + 2 * page, &v) == -ENOENT);
}
