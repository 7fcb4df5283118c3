// map_location.h - torch's map_location, made explicit: where each storage goes, decided before any byte is read.
#pragma once

#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "maploc/remap/device.h"

namespace maploc::remap {

/// What a mapping decision may look at for one storage.
struct StorageRef {
  std::string_view key;        ///< storage key from the persistent id ("0", "94919395964320")
  std::string_view dtype;      ///< torch's dtype name ("float32")
  std::uint64_t nbytes = 0;
  std::string_view location;   ///< the saved location tag, verbatim ("cuda:1", "mps")
  /// Names of the tensors that view this storage, in checkpoint order
  /// (the first one names the storage in messages).
  std::span<const std::string> tensor_names;
};

/// One `FROM->TO` rule: FROM is a glob over location tags (or, for a name
/// rule, over tensor names); `*` matches any run of characters.
struct Rule {
  std::string pattern;
  std::string target;    ///< a device spelling, resolved like torch's default restore
  bool by_name = false;  ///< `name:PATTERN->TO`
};

/// A caller decision per storage: a device spelling, or nullopt for "default"
/// (the saved tag), as torch's callable map_location returning None.
using MapCallback = std::function<std::optional<std::string>(const StorageRef&)>;

/// Where storages go. Evaluation per storage: the callback if set; else the
/// name rules (all that match the storage's tensors must agree); else the
/// first tag rule whose pattern matches the saved tag; else the saved tag.
/// The chosen spelling is then restored as torch's default_restore_location
/// does: `cpu`, `cuda`/`cuda:N` (checked against the inventory), `meta`,
/// `auto` (cuda:0 when a GPU is present, else cpu); any other tag is an error.
struct MapLocation {
  std::vector<Rule> rules;
  MapCallback callback;

  /// No mapping: every storage goes back to its saved tag (torch's None).
  static MapLocation none() { return {}; }
  /// Every storage to one device, tag ignored (torch's str/torch.device).
  static MapLocation all_to(std::string device);
  /// Parses the SPEC grammar (docs/map-location.md):
  ///   SPEC  := ITEM (',' ITEM)*
  ///   ITEM  := DEVICE | TAGPATTERN '->' DEVICE | 'name:' NAMEPATTERN '->' DEVICE
  ///   DEVICE:= cpu | cuda | cuda:N | cuda:local | meta | auto
  /// A bare DEVICE is `*->DEVICE` (so `cpu` maps everything to the CPU).
  /// `cuda:local` is cuda:N with N read from the environment variable
  /// LOCAL_RANK now (torchrun sets it per process), so that
  /// `cuda:*->cuda:local` puts each rank's storages on its own device;
  /// kRemapBadSpec when LOCAL_RANK is unset or not a number.
  /// Raises kRemapBadSpec naming the offending item.
  static MapLocation parse(std::string_view spec);
};

/// The decision for every storage, or a maploc::Error (Stage::kRemap) for
/// the first storage that cannot be placed, naming it and its first tensor:
/// kRemapCudaUnavailable, kRemapNoSuchDevice, kRemapUnknownTag,
/// kRemapConflictingRules, kRemapBadSpec (a rule's target is no device).
/// Pure: reads no byte and allocates no device memory.
std::vector<Device> decide(std::span<const StorageRef> storages, const MapLocation& map,
                           const DeviceInventory& inventory);

/// True when `text` matches the glob `pattern` (`*` = any run, incl. empty).
bool glob_match(std::string_view pattern, std::string_view text);

}  // namespace maploc::remap
