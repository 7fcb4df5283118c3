// device.h - where a storage can be placed: the CPU, a CUDA device, or nowhere (meta).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace maploc::remap {

class DeviceBackend;  // the device runtime placement goes through (internal)

/// A placement target. `meta` keeps shapes only and reads no byte.
struct Device {
  enum class Kind : std::uint8_t { kCpu, kCuda, kMeta };
  Kind kind = Kind::kCpu;
  int index = 0;  ///< CUDA device ordinal; 0 for cpu and meta

  static Device cpu() { return {Kind::kCpu, 0}; }
  static Device cuda(int index) { return {Kind::kCuda, index}; }
  static Device meta() { return {Kind::kMeta, 0}; }

  /// torch's spelling: "cpu", "cuda:1", "meta".
  std::string str() const;
  friend bool operator==(const Device&, const Device&) = default;
};

/// What the machine offers; probed from the CUDA runtime, simulated, or set by tests.
struct DeviceInventory {
  /// CUDA devices present; 0 when maploc is built without CUDA, no CUDA
  /// runtime library can be loaded, or the runtime reports any error (no
  /// driver, no device).
  int cuda_device_count = 0;
  /// True when maploc was built with the CUDA backend.
  bool cuda_built = false;
  /// Why no CUDA device is usable, when none is: each runtime library tried and
  /// what it said (missing, too old, newer than the driver, no device) and how to
  /// fix it. Where a device is usable: empty, or the libraries passed over first.
  std::string cuda_note;
  /// The runtime that allocates and copies: the CUDA runtime (loaded with
  /// dlopen on first use), a simulated device, or null (nothing can be placed
  /// on CUDA, plans are still made against cuda_device_count).
  std::shared_ptr<DeviceBackend> backend;

  /// The inventory of this process (cached after the first call). A binary
  /// built with CUDA runs where no CUDA runtime is installed: no device then.
  static const DeviceInventory& probe();
  /// Simulated CUDA devices with these capacities in bytes: their memory is
  /// host memory and their copies run on a worker thread. For planning
  /// against a machine you are not on (`maploc plan --devices`) and for tests.
  static DeviceInventory simulated(std::vector<std::uint64_t> capacities);
};

}  // namespace maploc::remap
