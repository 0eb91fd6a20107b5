// Issue 13: host threads do not grow with the number of contexts (DESIGN.md D9): one completion
// engine serves them all, and it exists only while some context does.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <memory>
#include <vector>

#include "queue/completion_engine.h"
#include "support/context_harness.h"
#include "support/thread_count.h"

using namespace rvgl;
using namespace rvgl::test;

TEST_CASE("host threads: 256 idle contexts have as many as one", "[context][threads]") {
  std::vector<std::unique_ptr<ContextHarness>> ctx;
  ctx.push_back(std::make_unique<ContextHarness>(test_config(), true, 1));
  ctx.back()->create_shmem();
  int32_t r;
  ctx.back()->queue_create(RVGL_IP_COMPUTE, 1, &r);
  REQUIRE(r == 0);
  const int one = thread_count();
  CHECK(CompletionEngine::threads_running() == 1);
  // The kernel's eventfd path where it has SYNCOBJ_EVENTFD, the one-wait path where it has not.
  CHECK(ctx.back()->ctx().completion_engine().uses_eventfd() ==
        (std::getenv("RVGL_EMU_NO_SYNCOBJ_EVENTFD") == nullptr));
  for (uint32_t id = 2; id <= 256; ++id) {
    ctx.push_back(std::make_unique<ContextHarness>(test_config(), (id & 1) != 0, id));
    ctx.back()->create_shmem();
    ctx.back()->queue_create(id & 1 ? RVGL_IP_COMPUTE : RVGL_IP_SDMA, 1, &r);
    REQUIRE(r == 0);
  }
  CHECK(thread_count() == one);
  CHECK(CompletionEngine::threads_running() == 1);
  ctx.clear();
  // The engine goes with its last context.
  CHECK(CompletionEngine::threads_running() == 0);
  CHECK(thread_count() == one - 1);
}
