// device.cpp - device spellings and the process's device inventory.
#include "maploc/remap/device.h"

#include "remap/cuda_backend.h"

namespace maploc::remap {

std::string Device::str() const {
  switch (kind) {
    case Kind::kCpu: return "cpu";
    case Kind::kMeta: return "meta";
    case Kind::kCuda: return "cuda:" + std::to_string(index);
  }
  return "cpu";
}

const DeviceInventory& DeviceInventory::probe() {
  static const DeviceInventory inventory = [] {
    DeviceInventory inv;
    inv.cuda_built = detail::cuda_built();
    inv.cuda_device_count = detail::cuda_device_count();
    return inv;
  }();
  return inventory;
}

}  // namespace maploc::remap
