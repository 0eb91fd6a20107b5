#include "virtgpu_node.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

namespace rvgl::guest::virtgpu {

namespace {

constexpr const char kRenderPrefix[] = "renderD";

// N of "renderD<N>", or -1 for any other name.
long render_minor(const std::string &name) {
  const size_t n = sizeof(kRenderPrefix) - 1;
  if (name.size() <= n || name.compare(0, n, kRenderPrefix) != 0) return -1;
  if (!std::all_of(name.begin() + n, name.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return -1;
  if (name.size() - n > 9) return -1;  // no render minor is that long
  return std::strtol(name.c_str() + n, nullptr, 10);
}

}  // namespace

Result<std::vector<std::string>> render_node_paths(VirtgpuSyscalls &sys) {
  std::vector<std::string> names;
  const int r = sys.list_dir(kDriDirectory, names);
  if (r < 0)
    return make_error(
        r, std::string("virtio-gpu: cannot list ") + kDriDirectory + ": " + std::strerror(-r));
  std::vector<std::pair<long, std::string>> nodes;
  for (const auto &name : names)
    if (const long minor = render_minor(name); minor >= 0) nodes.emplace_back(minor, name);
  std::sort(nodes.begin(), nodes.end());
  std::vector<std::string> paths;
  for (const auto &[minor, name] : nodes)
    paths.push_back(std::string(kDriDirectory) + "/" + name);
  return paths;
}

Result<Device> open_virtgpu_node(VirtgpuSyscalls &sys, const std::string &path) {
  auto dev = Device::open(sys, path);
  if (!dev) return dev.error();
  auto name = dev->driver_name();
  if (!name) return make_error(name.code(), name.error().message + " (" + path + ")");
  if (*name != kDriverName)
    return make_error(-ENODEV,
                      "virtio-gpu: " + path + " is driven by " + *name + ", not " + kDriverName);
  return dev;
}

}  // namespace rvgl::guest::virtgpu
