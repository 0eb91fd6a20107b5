// open_file_named_elsewhere(): how a context tells a file the VMM handed over whole from a dup
// the VMM (or another context) kept.
#include <catch2/catch.hpp>

#include <fcntl.h>

#include "util/same_open_file.h"
#include "util/unique_fd.h"

using rvgl::open_file_named_elsewhere;
using rvgl::UniqueFd;

TEST_CASE("open_file_named_elsewhere: a dup names the file, a second open does not", "[util]") {
  UniqueFd a(::open("/dev/null", O_RDWR | O_CLOEXEC));
  REQUIRE(a);
  CHECK(open_file_named_elsewhere(a.get()) == 0);
  {
    UniqueFd other_open(::open("/dev/null", O_RDWR | O_CLOEXEC));  // another file, same inode
    REQUIRE(other_open);
    CHECK(open_file_named_elsewhere(a.get()) == 0);
    UniqueFd dup(fcntl(a.get(), F_DUPFD_CLOEXEC, 0));
    REQUIRE(dup);
    CHECK(open_file_named_elsewhere(a.get()) == 1);
    CHECK(open_file_named_elsewhere(dup.get()) == 1);
    CHECK(open_file_named_elsewhere(other_open.get()) == 0);
  }
  CHECK(open_file_named_elsewhere(a.get()) == 0);
}

TEST_CASE("open_file_named_elsewhere: a dup at a number past the others is found", "[util]") {
  UniqueFd a(::open("/dev/null", O_RDWR | O_CLOEXEC));
  REQUIRE(a);
  UniqueFd high(fcntl(a.get(), F_DUPFD_CLOEXEC, 900));
  REQUIRE(high);
  CHECK(high.get() >= 900);
  CHECK(open_file_named_elsewhere(a.get()) == 1);
}

TEST_CASE("open_file_named_below: the fd numbers asked one by one, as without /proc", "[util]") {
  UniqueFd a(::open("/dev/null", O_RDWR | O_CLOEXEC));
  REQUIRE(a);
  UniqueFd other_open(::open("/dev/null", O_RDWR | O_CLOEXEC));
  REQUIRE(other_open);
  CHECK(rvgl::open_file_named_below(a.get(), 1024) == 0);
  UniqueFd high(fcntl(a.get(), F_DUPFD_CLOEXEC, 700));
  REQUIRE(high);
  CHECK(rvgl::open_file_named_below(a.get(), 1024) == 1);
  CHECK(rvgl::open_file_named_below(a.get(), high.get()) == 0);  // the dup lies above the range
}
