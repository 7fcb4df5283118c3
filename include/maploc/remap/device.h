// device.h - where a storage can be placed: the CPU, a CUDA device, or nowhere (meta).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace maploc::remap {

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

/// What the machine offers; probed by the CUDA backend, or set by tests.
struct DeviceInventory {
  /// CUDA devices present; 0 when maploc is built without CUDA or the
  /// runtime reports any error (no driver, no device).
  int cuda_device_count = 0;
  /// True when maploc was built with the CUDA backend.
  bool cuda_built = false;

  /// The inventory of this process (cached after the first call).
  static const DeviceInventory& probe();
};

}  // namespace maploc::remap
