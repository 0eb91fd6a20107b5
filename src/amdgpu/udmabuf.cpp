#include "amdgpu/udmabuf.h"

#include <fcntl.h>
#include <linux/udmabuf.h>
#include <sys/ioctl.h>

#include <cerrno>

namespace rvgl {

static_assert(sizeof(udmabuf_create_list) == 8 && sizeof(udmabuf_create_item) == 24);

UdmabufList::UdmabufList(uint32_t max_items)
    : mem_((sizeof(udmabuf_create_list) + uint64_t{max_items} * sizeof(udmabuf_create_item)) / 8),
      max_items_(max_items) {
  auto *list = reinterpret_cast<udmabuf_create_list *>(mem_.data());
  list->flags = UDMABUF_FLAGS_CLOEXEC;
  list->count = 0;
}

bool UdmabufList::add(int memfd, uint64_t offset, uint64_t size) {
  if (count_ >= max_items_ || memfd < 0) return false;
  auto *list = reinterpret_cast<udmabuf_create_list *>(mem_.data());
  list->list[count_++] = udmabuf_create_item{static_cast<uint32_t>(memfd), 0, offset, size};
  list->count = count_;
  bytes_ += size;
  return true;
}

void UdmabufList::clear() {
  count_ = 0;
  bytes_ = 0;
  reinterpret_cast<udmabuf_create_list *>(mem_.data())->count = 0;
}

Udmabuf Udmabuf::open(int *err) {
  Udmabuf u;
  u.dev_.reset(::open("/dev/udmabuf", O_RDWR | O_CLOEXEC));
  *err = u.dev_ ? 0 : -errno;
  return u;
}

int Udmabuf::create(const UdmabufList &items, UniqueFd *out) const {
  if (items.count_ == 0) return -EINVAL;
  // The kernel only reads the list (udmabuf_ioctl_create_list: memdup_user).
  auto *list = const_cast<uint64_t *>(items.mem_.data());
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
