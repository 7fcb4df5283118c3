// device.cpp - device spellings and the process's device inventory.
#include "maploc/remap/device.h"

#include "device_backend.h"
#include "simulated_backend.h"

namespace maploc::remap {

std::string Device::str() const {
  switch (kind) {
    case Kind::kCpu: return "cpu";
    case Kind::kCuda: return "cuda:" + std::to_string(index);
    case Kind::kMeta: return "meta";
  }
  return "cpu";
}

const DeviceInventory& DeviceInventory::probe() {
  static const DeviceInventory inventory = [] {
    DeviceInventory inv;
#ifdef MAPLOC_HAVE_CUDA
    inv.cuda_built = true;
#endif
    std::string why;
    inv.backend = detail::cuda_runtime(&why);
    if (inv.backend) inv.cuda_device_count = inv.backend->device_count();
    // Each library tried and what it said (a runtime newer than the driver, no device, ...);
    // where a device answers, the libraries passed over on the way, if any.
    if (inv.cuda_device_count == 0) {
      inv.cuda_note = why.empty() && inv.backend ? inv.backend->name() + " reports no device" : why;
    } else if (!why.empty()) {
      inv.cuda_note = "using " + inv.backend->name() + " after: " + why;
    }
    return inv;
  }();
  return inventory;
}

DeviceInventory DeviceInventory::simulated(std::vector<std::uint64_t> capacities) {
  DeviceInventory inv;
  inv.cuda_built = true;
  inv.cuda_device_count = static_cast<int>(capacities.size());
  inv.backend = std::make_shared<detail::SimulatedBackend>(detail::SimulatedBackend::Options{std::move(capacities)});
  return inv;
}

}  // namespace maploc::remap
