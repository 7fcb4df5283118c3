// plan.cpp - the placement plan: one decision per storage, totals per device, a fit check.
#include "maploc/remap/plan.h"

#include <algorithm>

#include "maploc/error.h"
#include "device_backend.h"
#include "storage_names.h"

namespace maploc::remap {
namespace detail {

std::vector<std::vector<std::string>> storage_tensor_names(const torch::Checkpoint& checkpoint) {
  std::vector<std::vector<std::string>> names(checkpoint.storages().size());
  for (const auto& t : checkpoint.tensors()) {
    if (t.storage && *t.storage < names.size()) names[*t.storage].push_back(t.name);
  }
  return names;
}

std::string describe_storage(const torch::Storage& storage, const std::vector<std::string>& names) {
  std::string out = "storage '" + storage.key + "'";
  if (!names.empty()) out += " of tensor '" + names.front() + "'";
  return out;
}

}  // namespace detail

namespace {

int device_rank(const Device& d) {
  switch (d.kind) {
    case Device::Kind::kCpu: return -1;
    case Device::Kind::kCuda: return d.index;
    case Device::Kind::kMeta: return 1 << 30;
  }
  return 0;
}

// One decision per storage. Tensor names are gathered only where the map
// looks at them (name rules, a callback) or an error must name a tensor:
// W1's 30,000 storages would otherwise copy 30,000 names per plan.
std::vector<Device> decide_all(const torch::Checkpoint& checkpoint, const MapLocation& map,
                               const DeviceInventory& inventory) {
  const auto& storages = checkpoint.storages();
  const bool names_matter =
      map.callback || std::any_of(map.rules.begin(), map.rules.end(), [](const Rule& r) { return r.by_name; });
  // In blocks: the references of 30,000 storages would fill 2 MB of fresh pages.
  constexpr std::size_t kBlock = 1024;
  auto with_names = [&](const std::vector<std::vector<std::string>>* names) {
    std::vector<Device> out;
    out.reserve(storages.size());
    std::vector<StorageRef> refs;
    refs.reserve(std::min(storages.size(), kBlock));
    for (std::size_t begin = 0; begin < storages.size(); begin += kBlock) {
      refs.clear();
      for (std::size_t i = begin; i < std::min(storages.size(), begin + kBlock); ++i) {
        const auto& s = storages[i];
        refs.push_back({s.key, torch::dtype_name(s.dtype), s.nbytes, s.location,
                        names ? std::span<const std::string>((*names)[i]) : std::span<const std::string>()});
      }
      const auto decided = decide(refs, map, inventory);
      out.insert(out.end(), decided.begin(), decided.end());
    }
    return out;
  };
  if (!names_matter) {
    try {
      return with_names(nullptr);
    } catch (const Error&) {
      // Decide again with the names, for a message that names the tensor.
    }
  }
  const auto names = detail::storage_tensor_names(checkpoint);
  return with_names(&names);
}

}  // namespace

Plan make_plan(const torch::Checkpoint& checkpoint, const MapLocation& map, const DeviceInventory& inventory) {
  const auto& storages = checkpoint.storages();
  Plan plan;
  plan.targets = decide_all(checkpoint, map, inventory);
  for (std::size_t i = 0; i < storages.size(); ++i) {
    const Device& d = plan.targets[i];
    auto it = std::find_if(plan.totals.begin(), plan.totals.end(), [&](const DeviceTotal& t) { return t.device == d; });
    if (it == plan.totals.end()) it = plan.totals.insert(plan.totals.end(), DeviceTotal{d, 0, 0, std::nullopt});
    it->bytes += storages[i].nbytes;
    it->storages += 1;
  }
  std::sort(plan.totals.begin(), plan.totals.end(),
            [](const DeviceTotal& a, const DeviceTotal& b) { return device_rank(a.device) < device_rank(b.device); });
  // Free memory from the inventory's runtime (real or simulated); a made-up
  // inventory without one has no figure to compare with.
  DeviceBackend* backend = inventory.backend.get();
  const detail::DeviceGuard guard(backend);
  for (auto& t : plan.totals) {
    if (t.device.kind != Device::Kind::kCuda || backend == nullptr || t.device.index >= backend->device_count()) {
      continue;
    }
    const std::string where = "cuda:" + std::to_string(t.device.index);
    std::uint64_t free = 0, total = 0;
    detail::check_device(*backend, backend->set_device(t.device.index), "selecting " + where);
    detail::check_device(*backend, backend->mem_info(&free, &total), "asking " + where + " for its free memory");
    t.free_bytes = free;
  }
  return plan;
}

void check_fits(const Plan& plan) {
  for (const auto& t : plan.totals) {
    if (t.free_bytes && t.bytes > *t.free_bytes) {
      throw Error(ErrorCode::kRemapOutOfMemory, Stage::kRemap,
                  "the plan puts " + std::to_string(t.bytes) + " bytes (" + std::to_string(t.storages) +
                      " storages) on " + t.device.str() + " but only " + std::to_string(*t.free_bytes) +
                      " bytes are free there; map some storages elsewhere, e.g. --map-location 'name:PATTERN->cpu'");
    }
  }
}

}  // namespace maploc::remap
