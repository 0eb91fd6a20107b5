#include <catch2/catch.hpp>

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

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

  auto maps = HostFileRanges::snapshot();
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
