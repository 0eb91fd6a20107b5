// Hardware facts the kernel does not report, keyed by what it does report. One home for them.
#pragma once

#include <cstdint>

namespace rvgl {

struct AsicFacts {
  uint16_t pci_device_id;
  const char *marketing_name;
  uint32_t xcc_per_xcp;  // compute dies behind one render node in the default partition mode
};

// nullptr for devices the table does not know.
const AsicFacts *find_asic(uint16_t pci_device_id);

}  // namespace rvgl
