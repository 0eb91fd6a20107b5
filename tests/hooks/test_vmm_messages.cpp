// What the hooks tell the host's operator about the VMM (issue 15, point 6): with RVGL_DEBUG=1 a
// VMM without context fences hears once per init, on its log callback and on stderr, that ROCM
// fences are all global and what to do.
#include <catch2/catch.hpp>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "renderer_fixture.h"

using namespace rvgl::hooks_test;

namespace {

std::vector<std::string> g_messages;

void log_cb(int level, const char *msg, void *) {
  if (level == 2 && std::strstr(msg, "write_context_fence")) g_messages.push_back(msg);
}

bool g_called_back = false;

// A VMM's log callback that asks the library something while it is being told (QEMU's own
// logging takes its locks; a VMM may well query state from there).
void calling_back_cb(int, const char *msg, void *) {
  if (!std::strstr(msg, "RVGL_CAPSET_ID=2 refused")) return;
  uint32_t ver = 0, size = 0;
  virgl_renderer_get_cap_set(8, &ver, &size);
  g_called_back = true;
}

}  // namespace

TEST_CASE("a refused RVGL_CAPSET_ID is told to the VMM's log outside the library's locks",
          "[hooks][debug]") {
  // router.h: no VMM callback runs under the router's lock; a log callback calling back in
  // would otherwise deadlock (this test would hang).
  virgl_set_log_callback(calling_back_cb, nullptr, nullptr);
  g_called_back = false;
  {
    ScopedEnv capset("RVGL_CAPSET_ID", "2");
    Renderer r(Renderer::Options{});
    CHECK(r.result() == -EINVAL);
  }
  virgl_set_log_callback(nullptr, nullptr, nullptr);
  CHECK(g_called_back);
}

TEST_CASE("RVGL_DEBUG=1 says once per init when the VMM has no context fences", "[hooks][debug]") {
  virgl_set_log_callback(log_cb, nullptr, nullptr);
  struct Case {
    int version;
    bool debug;
    size_t messages;
  };
  // Version 1 and 2 structs end before write_context_fence; 3 and 4 have it (the fixture sets
  // it from version 3 on). Without RVGL_DEBUG nothing is said.
  for (const Case c : {Case{1, true, 1}, Case{2, true, 1}, Case{3, true, 0}, Case{4, true, 0},
                       Case{1, false, 0}}) {
    INFO("callbacks version " << c.version << (c.debug ? ", RVGL_DEBUG=1" : ""));
    ScopedEnv debug("RVGL_DEBUG", c.debug ? "1" : nullptr);
    g_messages.clear();
    Renderer::Options o;
    o.callbacks_version = c.version;
    {
      Renderer r(o);
      REQUIRE(r.result() == 0);
      virgl_renderer_poll();
    }
    REQUIRE(g_messages.size() == c.messages);
    if (c.messages) {
      CHECK(g_messages[0].find("version " + std::to_string(c.version)) != std::string::npos);
      CHECK(g_messages[0].find("QEMU 10.1+") != std::string::npos);  // what to do
    }
  }
  virgl_set_log_callback(nullptr, nullptr, nullptr);
}
