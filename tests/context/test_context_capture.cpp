// Capture mode: what the context received and answered is on disk, in order.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "context/capture_format.h"
#include "context/capture_writer.h"
#include "support/context_harness.h"

using namespace rvgl;
using namespace rvgl::test;

namespace {

// A directory of its own for one test's capture file; both go when the test ends, passed or not.
class CaptureDir {
 public:
  explicit CaptureDir(const char *name) {
    const char *t = std::getenv("TMPDIR");
    dir_ = std::string(t && *t ? t : "/tmp") + "/" + name + "-" + std::to_string(getpid());
    REQUIRE(mkdir(dir_.c_str(), 0700) == 0);
  }
  ~CaptureDir() {
    if (!file.empty()) unlink(file.c_str());
    rmdir(dir_.c_str());
  }
  const std::string &path() const { return dir_; }
  std::string file;  // the context's capture file, once known

 private:
  std::string dir_;
};

}  // namespace

TEST_CASE("capture mode records submits, responses and results", "[context][capture]") {
  CaptureDir dir("rvgl-capture-test");
  Config c = test_config();
  c.capture_dir = dir.path();
  {
    ContextHarness h(c);
    h.create_shmem();
    dir.file = h.ctx().capture_path();
    rvgl_req_nop nop{};
    REQUIRE(h.call<rvgl_rsp_nop>(RVGL_CMD_NOP, nop).hdr.result == 0);
    int32_t r;
    h.bo_create(4096, 0, 0, 0, &r);  // refused: domain 0
    REQUIRE(r == -EINVAL);
  }
  REQUIRE(!dir.file.empty());
  FILE *f = std::fopen(dir.file.c_str(), "rb");
  REQUIRE(f);
  capture::FileHeader fh;
  REQUIRE(std::fread(&fh, sizeof(fh), 1, f) == 1);
  CHECK(std::memcmp(fh.magic, capture::kFileMagic, 8) == 0);
  CHECK(fh.ctx_id == 1);
  std::vector<capture::RecordHeader> recs;
  capture::RecordHeader rh;
  while (std::fread(&rh, sizeof(rh), 1, f) == 1) {
    recs.push_back(rh);
    std::fseek(f, (rh.length + 7) / 8 * 8, SEEK_CUR);
  }
  std::fclose(f);
  REQUIRE(recs.size() == 6);  // two submits, each SUBM, RESP, DONE
  CHECK(recs[0].type == capture::kSubmit);
  CHECK(recs[0].length == sizeof(rvgl_req_nop));
  CHECK(recs[1].type == capture::kResponse);
  CHECK(recs[1].cmd == RVGL_CMD_NOP);
  CHECK(recs[2].type == capture::kDone);
  CHECK(recs[4].cmd == RVGL_CMD_BO_CREATE);
  CHECK(recs[4].result == -EINVAL);
  CHECK(recs[5].result == 0);
}

TEST_CASE("capture mode does not write a buffer the host refuses unread", "[context][capture]") {
  CaptureDir dir("rvgl-capture-big");
  Config c = test_config();
  c.capture_dir = dir.path();
  c.limits.max_submit_bytes = 4096;
  {
    ContextHarness h(c);
    h.create_shmem();
    dir.file = h.ctx().capture_path();
    const std::vector<uint8_t> big(64 * c.limits.max_submit_bytes);
    for (int i = 0; i < 4; ++i)
      CHECK(h.ctx().submit_cmd(big) == -EINVAL);
  }
  struct stat st {};
  REQUIRE(stat(dir.file.c_str(), &st) == 0);
  // The file header and, per submit, an empty SUBM and its DONE.
  CHECK(st.st_size == off_t(sizeof(capture::FileHeader) + 4 * 2 * sizeof(capture::RecordHeader)));
}

TEST_CASE("capture files stop at the process's budget, with a FULL record", "[context][capture]") {
  CaptureDir dir("rvgl-capture-budget");
  constexpr uint64_t kHeader = sizeof(capture::FileHeader), kRecord = sizeof(capture::RecordHeader);
  const auto padded = [](uint64_t n) { return (n + 7) / 8 * 8; };
  // Room for the file header and one NOP submit (its SUBM, RESP and DONE), and less than a header
  // more.
  const uint64_t one_nop =
      3 * kRecord + padded(sizeof(rvgl_req_nop)) + padded(sizeof(rvgl_rsp_nop));
  Config c = test_config();
  c.capture_dir = dir.path();
  c.capture_budget = std::make_shared<CaptureBudget>(kHeader + one_nop + kHeader / 2);
  {
    ContextHarness h(c);
    h.create_shmem();
    dir.file = h.ctx().capture_path();
    rvgl_req_nop nop{};
    for (int i = 0; i < 3; ++i)
      REQUIRE(h.call<rvgl_rsp_nop>(RVGL_CMD_NOP, nop).hdr.result == 0);  // the guest sees no change
    // A second context of the process finds the budget without room for its header: no file.
    ContextHarness other(c, false, 2);
    CHECK(other.ctx().capture_path().empty());
  }
  CHECK(c.capture_budget->used() == kHeader + one_nop);
  REQUIRE(!dir.file.empty());
  FILE *f = std::fopen(dir.file.c_str(), "rb");
  REQUIRE(f);
  std::fseek(f, static_cast<long>(kHeader), SEEK_SET);
  std::vector<uint32_t> types;
  capture::RecordHeader rh;
  while (std::fread(&rh, sizeof(rh), 1, f) == 1) {
    types.push_back(rh.type);
    std::fseek(f, static_cast<long>(padded(rh.length)), SEEK_CUR);
  }
  std::fclose(f);
  // The first submit whole; the second's SUBM did not fit, and FULL ends the file.
  CHECK(types == std::vector<uint32_t>{capture::kSubmit, capture::kResponse, capture::kDone,
                                       capture::kFull});
  struct stat st {};
  REQUIRE(stat(dir.file.c_str(), &st) == 0);
  CHECK(uint64_t(st.st_size) == kHeader + one_nop + kRecord);
}
