// plan.h - where every storage of a checkpoint will go, and how much each device must hold.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "maploc/remap/device.h"
#include "maploc/remap/map_location.h"
#include "maploc/torch/checkpoint.h"

namespace maploc::remap {

/// Bytes and storages bound for one device.
struct DeviceTotal {
  Device device;
  std::uint64_t bytes = 0;
  std::uint64_t storages = 0;
  /// Free memory the device reports (CUDA only; nullopt for cpu and meta).
  std::optional<std::uint64_t> free_bytes;
};

/// The placement of every storage, decided before any byte is read.
struct Plan {
  /// targets[i] is where checkpoint.storages()[i] goes.
  std::vector<Device> targets;
  /// One row per device used, cpu first, then cuda by index, then meta.
  std::vector<DeviceTotal> totals;
};

/// Decides every storage's device (see decide()) and sums the bytes per
/// device. Raises the kRemap* codes of decide(), naming the storage and its
/// first tensor. Reads no storage byte and allocates no device memory.
Plan make_plan(const torch::Checkpoint& checkpoint, const MapLocation& map, const DeviceInventory& inventory);

/// Raises kRemapOutOfMemory when a CUDA device's total exceeds its free
/// memory, naming the device and both numbers.
void check_fits(const Plan& plan);

/// The location tag each storage gets when the file is rewritten with `map`
/// (`maploc remap`, torch::ArchiveOptions::locations): a tag is only text, so
/// `cuda:3` needs no GPU; `auto` is resolved against this machine; a storage
/// no rule matches gets "" (keeps its tag verbatim: mps, xpu:0, ...).
/// Raises kRemapBadRewriteTarget for a storage mapped to meta (no file can
/// hold it) and decide()'s codes, naming the storage.
std::vector<std::string> rewritten_tags(const torch::Checkpoint& checkpoint, const MapLocation& map);

}  // namespace maploc::remap
