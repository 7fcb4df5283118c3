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
    inv.backend = detail::cuda_runtime(&inv.cuda_note);
    if (inv.backend) {
      inv.cuda_device_count = inv.backend->device_count();
      if (inv.cuda_device_count == 0) {
        inv.cuda_note = inv.backend->name() + " reports no device (no driver, or no GPU visible to this process)";
      }
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
