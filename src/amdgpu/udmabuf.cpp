#include "amdgpu/udmabuf.h"

#include <fcntl.h>
#include <linux/udmabuf.h>
#include <sys/ioctl.h>

#include <cerrno>
#include <vector>

namespace rvgl {

Udmabuf Udmabuf::open(int *err) {
  Udmabuf u;
  u.dev_.reset(::open("/dev/udmabuf", O_RDWR | O_CLOEXEC));
  *err = u.dev_ ? 0 : -errno;
  return u;
}

int Udmabuf::create_list(std::span<const UdmabufItem> items, UniqueFd *out) const {
  if (items.empty() || items.size() > UINT32_MAX) return -EINVAL;
  // struct udmabuf_create_list ends in a flexible array of udmabuf_create_item (uapi udmabuf.h).
  std::vector<uint8_t> mem(sizeof(udmabuf_create_list) +
                           items.size() * sizeof(udmabuf_create_item));
  auto *list = reinterpret_cast<udmabuf_create_list *>(mem.data());
  list->flags = UDMABUF_FLAGS_CLOEXEC;
  list->count = static_cast<uint32_t>(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    if (items[i].memfd < 0) return -EBADF;
    list->list[i] = udmabuf_create_item{static_cast<uint32_t>(items[i].memfd), 0, items[i].offset,
                                        items[i].size};
  }
  int fd;
  do {
    fd = ::ioctl(dev_.get(), UDMABUF_CREATE_LIST, list);
  } while (fd < 0 && (errno == EINTR || errno == EAGAIN));
  if (fd < 0) return -errno;
  out->reset(fd);
  return 0;
}

bool udmabuf_accepts(int memfd) {
  const int seals = fcntl(memfd, F_GET_SEALS);
  return seals >= 0 && (seals & F_SEAL_SHRINK) && !(seals & F_SEAL_WRITE);
}

}  // namespace rvgl
