// The virtio-gpu uAPI as this library defines it (virtgpu_uapi.h): layouts are static_asserted
// there; here the ioctl request numbers, which encode each argument's size, against the values
// the kernel's and Mesa's headers expand to.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>

#include "virtgpu_uapi.h"

TEST_CASE("the ioctl numbers are the kernel's", "[guest][virtgpu][uapi]") {
  // _IOWR('d', 0x40 + nr, size) and, for GEM_CLOSE, _IOW('d', 0x09, 8).
  CHECK(RVGL_IOCTL_VIRTGPU_EXECBUFFER == 0xc0406442ul);
  CHECK(RVGL_IOCTL_VIRTGPU_RESOURCE_CREATE_BLOB == 0xc030644aul);
  CHECK(RVGL_IOCTL_VIRTGPU_RESOURCE_CREATE_BLOB_USERPTR == 0xc038644aul);
  CHECK(RVGL_IOCTL_VIRTGPU_CONTEXT_INIT == 0xc010644bul);
  CHECK(DRM_IOCTL_VIRTGPU_GETPARAM == 0xc0106443ul);
  CHECK(DRM_IOCTL_VIRTGPU_GET_CAPS == 0xc0186449ul);
  CHECK(DRM_IOCTL_VIRTGPU_MAP == 0xc0106441ul);
  CHECK(DRM_IOCTL_VIRTGPU_WAIT == 0xc0086448ul);
  CHECK(DRM_IOCTL_GEM_CLOSE == 0x40086409ul);
}

TEST_CASE("the userptr blob argument extends the upstream one in place", "[guest][virtgpu][uapi]") {
  rvgl_virtgpu_resource_create_blob_userptr a{};
  a.base.blob_id = 0x1122334455667788ull;
  a.userptr = 0x7f0000001000ull;
  const auto *bytes = reinterpret_cast<const uint8_t *>(&a);
  uint64_t at40 = 0, at48 = 0;
  std::memcpy(&at40, bytes + 40, 8);
  std::memcpy(&at48, bytes + 48, 8);
  CHECK(at40 == 0x1122334455667788ull);  // blob_id where the kernel reads it
  CHECK(at48 == 0x7f0000001000ull);      // then the series' userptr
  // The two ioctl numbers differ only in the size field.
  CHECK(
      (RVGL_IOCTL_VIRTGPU_RESOURCE_CREATE_BLOB ^ RVGL_IOCTL_VIRTGPU_RESOURCE_CREATE_BLOB_USERPTR) ==
      static_cast<unsigned long>((48u ^ 56u) << 16));
}
