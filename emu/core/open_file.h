// What an fd handed out by the emulator refers to. The interposer keeps fd -> OpenFile so dup(),
// close() and passing an fd back in (PRIME import, syncobj import) find the same object.
#pragma once

#include <memory>
#include <string>

namespace rvgl::emu {

class BufferObject;
class SegmentBacking;
class Syncobj;
class Fence;

class OpenFile {
 public:
  enum class Kind { Device, DmaBuf, Udmabuf, UdmabufDevice, Syncobj, SyncFile, TreeDir };
  explicit OpenFile(Kind k) : kind_(k) {}
  virtual ~OpenFile() = default;
  OpenFile(const OpenFile &) = delete;
  OpenFile &operator=(const OpenFile &) = delete;
  Kind kind() const { return kind_; }

 private:
  Kind kind_;
};

// A dma-buf exported from an amdgpu object (its fd is a memfd with the object's pages).
struct DmaBufFile final : OpenFile {
  explicit DmaBufFile(std::shared_ptr<BufferObject> b) : OpenFile(Kind::DmaBuf), bo(std::move(b)) {}
  std::shared_ptr<BufferObject> bo;
};

// A udmabuf: pieces of the caller's memfds, usable as a dma-buf.
struct UdmabufFile final : OpenFile {
  explicit UdmabufFile(std::shared_ptr<SegmentBacking> b);
  ~UdmabufFile() override;
  std::shared_ptr<SegmentBacking> backing;
};

// /dev/udmabuf itself.
struct UdmabufDeviceFile final : OpenFile {
  UdmabufDeviceFile() : OpenFile(Kind::UdmabufDevice) {}
};

// A syncobj exported as an fd (DRM_IOCTL_SYNCOBJ_HANDLE_TO_FD without flags).
struct SyncobjFile final : OpenFile {
  explicit SyncobjFile(std::shared_ptr<Syncobj> s)
      : OpenFile(Kind::Syncobj), syncobj(std::move(s)) {}
  std::shared_ptr<Syncobj> syncobj;
};

// A sync_file: one fence. Its fd (an eventfd) becomes readable when the fence signals.
struct SyncFileFile final : OpenFile {
  explicit SyncFileFile(std::shared_ptr<Fence> f) : OpenFile(Kind::SyncFile), fence(std::move(f)) {}
  std::shared_ptr<Fence> fence;
};

// A directory of the fake tree opened by its public name (/dev/dri, /sys/class/drm, ...), so
// *at() calls relative to it resolve as they would under the public name.
struct TreeDirFile final : OpenFile {
  explicit TreeDirFile(std::string public_path)
      : OpenFile(Kind::TreeDir), path(std::move(public_path)) {}
  std::string path;
};

}  // namespace rvgl::emu
