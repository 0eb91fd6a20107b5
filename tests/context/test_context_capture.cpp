// Capture mode: what the context received and answered is on disk, in order.
#include <catch2/catch.hpp>

#include <dirent.h>
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
    if (DIR *d = opendir(dir_.c_str())) {
      while (const dirent *e = readdir(d))
        if (std::strcmp(e->d_name, ".") && std::strcmp(e->d_name, ".."))
          unlink((dir_ + "/" + e->d_name).c_str());
      closedir(d);
    }
    rmdir(dir_.c_str());
  }
  const std::string &path() const { return dir_; }
  std::string file;  // the context's capture file, once known

 private:
  std::string dir_;
};

// The types of the records of capture file `path`, after its header (whose ctx_id goes to *ctx).
std::vector<uint32_t> record_types(const std::string &path, uint32_t *ctx) {
  std::vector<uint32_t> types;
  FILE *f = std::fopen(path.c_str(), "rb");
  if (!f) return types;
  capture::FileHeader fh{};
  if (std::fread(&fh, sizeof(fh), 1, f) == 1) {
    *ctx = fh.ctx_id;
    capture::RecordHeader rh;
    while (std::fread(&rh, sizeof(rh), 1, f) == 1) {
      types.push_back(rh.type);
      std::fseek(f, (rh.length + 7) / 8 * 8, SEEK_CUR);
    }
  }
  std::fclose(f);
  return types;
}

}  // namespace

TEST_CASE("a context id used again writes a capture file of its own", "[context][capture]") {
  // Guest kernels hand out context ids lowest-free: a VMM reuses one as soon as a guest process
  // ends, and that context's capture must not truncate the one before (nor a file already there).
  CaptureDir dir("rvgl-capture-reuse");
  Config c = test_config();
  c.capture_dir = dir.path();
  c.capture_budget = std::make_shared<CaptureBudget>(1 << 20);
  const std::string stale =
      dir.path() + "/rvgl-capture-" + std::to_string(getpid()) + "-ctx7-2.bin";
  {
    FILE *f = std::fopen(stale.c_str(), "wb");
    REQUIRE(f);
    REQUIRE(std::fputs("left by someone else", f) >= 0);
    std::fclose(f);
  }
  std::vector<std::string> paths;
  for (int nops = 1; nops <= 3; ++nops) {
    ContextHarness h(c, false, 7);
    h.create_shmem();
    paths.push_back(h.ctx().capture_path());
    rvgl_req_nop nop{};
    for (int i = 0; i < nops; ++i)
      REQUIRE(h.call<rvgl_rsp_nop>(RVGL_CMD_NOP, nop).hdr.result == 0);
  }
  const std::string base = dir.path() + "/rvgl-capture-" + std::to_string(getpid()) + "-ctx7";
  // The first has the plain name; -2 was taken, so the next free numbers are 3 and 4.
  CHECK(paths == std::vector<std::string>{base + ".bin", base + "-3.bin", base + "-4.bin"});
  for (size_t i = 0; i < paths.size(); ++i) {
    INFO(paths[i]);
    uint32_t ctx = 0;
    const auto types = record_types(paths[i], &ctx);
    CHECK(ctx == 7);
    CHECK(types.size() == 3 * (i + 1));  // each NOP submit: SUBM, RESP, DONE
    struct stat st {};
    REQUIRE(stat(paths[i].c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0600);  // guest data
  }
  struct stat st {};
  REQUIRE(stat(stale.c_str(), &st) == 0);
  CHECK(st.st_size == off_t(std::strlen("left by someone else")));
}

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
  // Room for a file and one NOP submit (its SUBM, RESP and DONE), and less than a record more.
  constexpr uint64_t kFile = CaptureWriter::kFileCharge;
  const uint64_t one_nop =
      3 * kRecord + padded(sizeof(rvgl_req_nop)) + padded(sizeof(rvgl_rsp_nop));
  Config c = test_config();
  c.capture_dir = dir.path();
  c.capture_budget = std::make_shared<CaptureBudget>(kFile + one_nop + kRecord / 2);
  {
    ContextHarness h(c);
    h.create_shmem();
    dir.file = h.ctx().capture_path();
    rvgl_req_nop nop{};
    for (int i = 0; i < 3; ++i)
      REQUIRE(h.call<rvgl_rsp_nop>(RVGL_CMD_NOP, nop).hdr.result == 0);  // the guest sees no change
    // A second context of the process finds the budget without room for a file: none.
    ContextHarness other(c, false, 2);
    CHECK(other.ctx().capture_path().empty());
  }
  CHECK(c.capture_budget->used() == kFile + one_nop);
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

TEST_CASE("contexts created and destroyed in a loop make no more capture files than the budget",
          "[context][capture]") {
  // Each file is charged a block whatever it holds: a guest churning contexts that write almost
  // nothing must not fill the disk's inodes while the bytes stay far below the budget.
  CaptureDir dir("rvgl-capture-churn");
  constexpr uint64_t kFiles = 8;
  Config c = test_config();
  c.capture_dir = dir.path();
  c.capture_budget = std::make_shared<CaptureBudget>(kFiles * CaptureWriter::kFileCharge);
  uint64_t made = 0;
  for (uint32_t ctx = 1; ctx <= 3 * kFiles; ++ctx) {
    ContextHarness h(c, false, ctx);
    made += !h.ctx().capture_path().empty();
  }
  CHECK(made == kFiles);
  uint64_t files = 0;
  if (DIR *d = opendir(dir.path().c_str())) {
    while (const dirent *e = readdir(d))
      files += e->d_name[0] != '.';
    closedir(d);
  }
  CHECK(files == kFiles);
}
