#include "amdgpu/asic_table.h"

#include <array>

namespace rvgl {

namespace {

// PCI ids: pci.ids / the kernel's amdgpu_drv.c pciidlist; names: AMD product pages.
// MI300X in SPX mode exposes all 8 XCCs through one partition (AMD CDNA3 white paper).
constexpr std::array<AsicFacts, 6> kAsics{{
    {0x744C, "AMD Radeon RX 7900 XTX", 1},
    {0x7448, "AMD Radeon Pro W7900", 1},
    {0x7480, "AMD Radeon RX 7600", 1},
    {0x74A1, "AMD Instinct MI300X", 8},
    {0x74A0, "AMD Instinct MI300A", 6},
    {0x74A5, "AMD Instinct MI325X", 8},
}};

}  // namespace

const AsicFacts *find_asic(uint16_t pci_device_id) {
  for (const auto &a : kAsics)
    if (a.pci_device_id == pci_device_id) return &a;
  return nullptr;
}

}  // namespace rvgl
