#include "core/open_file.h"

#include "core/counters.h"
#include "memory/backing.h"

namespace rvgl::emu {

UdmabufFile::UdmabufFile(std::shared_ptr<SegmentBacking> b)
    : OpenFile(Kind::Udmabuf), backing(std::move(b)) {}

UdmabufFile::~UdmabufFile() = default;

}  // namespace rvgl::emu
