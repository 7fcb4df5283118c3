// load.cpp - remap::load: plan, allocate every storage where the plan says, fill it from the file.
#include <algorithm>
#include <optional>

#include "maploc/error.h"
#include "maploc/remap/loaded.h"
#include "maploc/remap/plan.h"
#include "remap/cuda_backend.h"
#include "remap/host_memory.h"
#include "remap/storage_names.h"

namespace maploc::remap {
namespace {

constexpr std::uint64_t kArenaAlignment = 256;

std::size_t swap_unit_for(const torch::Checkpoint& checkpoint, const torch::Storage& s) {
  return checkpoint.byteorder() == torch::ByteOrder::kBig ? torch::swap_unit(s.dtype) : 1;
}

// One allocation per CUDA device holding its storages at aligned offsets.
struct Arenas {
  std::vector<std::shared_ptr<void>> owners;   // per device index
  std::vector<std::uint8_t*> bases;
  std::vector<std::uint64_t> offsets;           // per storage
};

Arenas make_arenas(const torch::Checkpoint& checkpoint, const Plan& plan, int device_count) {
  Arenas a;
  a.owners.resize(static_cast<std::size_t>(device_count));
  a.bases.resize(static_cast<std::size_t>(device_count), nullptr);
  a.offsets.resize(plan.targets.size(), 0);
  std::vector<std::uint64_t> sizes(static_cast<std::size_t>(device_count), 0);
  for (std::size_t i = 0; i < plan.targets.size(); ++i) {
    if (plan.targets[i].kind != Device::Kind::kCuda) continue;
    auto& size = sizes[static_cast<std::size_t>(plan.targets[i].index)];
    a.offsets[i] = size;
    size += (checkpoint.storages()[i].nbytes + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment;
  }
  for (int d = 0; d < device_count; ++d) {
    const auto ud = static_cast<std::size_t>(d);
    if (sizes[ud] == 0) continue;
    void* base = nullptr;
    a.owners[ud] = detail::cuda_allocate(d, sizes[ud], &base, "the arena of cuda:" + std::to_string(d));
    a.bases[ud] = static_cast<std::uint8_t*>(base);
  }
  return a;
}

// A private writable mapping of the checkpoint file, or nothing when the
// checkpoint is not a plain file (then writable placements are copies).
std::optional<Bytes> copy_on_write_mapping(const torch::Checkpoint& checkpoint) {
  try {
    return MappedFile::open_copy_on_write(checkpoint.path()).bytes;
  } catch (const Error&) {
    return std::nullopt;
  }
}

PlacedStorage place_on_host(const torch::Checkpoint& checkpoint, std::size_t i, const LoadOptions& options,
                            const std::optional<Bytes>& cow, const std::string& who) {
  const torch::Storage& s = checkpoint.storages()[i];
  const std::size_t unit = swap_unit_for(checkpoint, s);
  const Bytes raw = checkpoint.storage_bytes(i);
  if (options.host == HostMemory::kPinned) return detail::host_copy(raw, unit, true, who);
  if (options.host == HostMemory::kOwnedCopy || unit > 1) return detail::host_copy(raw, unit, false, who);
  if (!options.writable) return detail::host_view(raw);
  if (cow && !s.compressed && s.file_offset <= cow->size() && s.nbytes <= cow->size() - s.file_offset) {
    return detail::host_cow_view(*cow, s.file_offset, s.nbytes);
  }
  return detail::host_copy(raw, unit, false, who);
}

}  // namespace

Loaded load(const torch::Checkpoint& checkpoint, const LoadOptions& options) {
  const DeviceInventory& inventory = options.inventory ? *options.inventory : DeviceInventory::probe();
  if (options.host == HostMemory::kPinned && !inventory.cuda_built) {
    throw Error(ErrorCode::kRemapCudaNotBuilt, Stage::kRemap,
                "pinned host memory needs a build with CUDA; use owned copies or mapped views instead");
  }
  const Plan plan = make_plan(checkpoint, options.map, inventory);
  check_fits(plan);

  const auto names = detail::storage_tensor_names(checkpoint);
  const auto& storages = checkpoint.storages();
  Loaded out;
  out.tensors_ = checkpoint.tensors();
  out.inventory_ = inventory;
  out.storages_.resize(storages.size());
  for (std::size_t t = 0; t < out.tensors_.size(); ++t) out.by_name_.emplace(out.tensors_[t].name, t);

  const bool any_cuda = std::any_of(plan.targets.begin(), plan.targets.end(),
                                    [](const Device& d) { return d.kind == Device::Kind::kCuda; });
  Arenas arenas;
  if (any_cuda && options.cuda.arena) arenas = make_arenas(checkpoint, plan, inventory.cuda_device_count);
  std::optional<Bytes> cow;
  if (options.writable && options.host == HostMemory::kMappedView) cow = copy_on_write_mapping(checkpoint);

  std::vector<detail::UploadJob> jobs;
  for (std::size_t i = 0; i < storages.size(); ++i) {
    const torch::Storage& s = storages[i];
    const Device& target = plan.targets[i];
    const std::string who = detail::describe_storage(s, names[i]);
    PlacedStorage& placed = out.storages_[i];
    switch (target.kind) {
      case Device::Kind::kMeta:
        placed.device = target;
        placed.nbytes = s.nbytes;
        break;
      case Device::Kind::kCpu:
        placed = place_on_host(checkpoint, i, options, cow, who);
        break;
      case Device::Kind::kCuda: {
        placed.device = target;
        placed.nbytes = s.nbytes;
        placed.writable = true;
        const auto d = static_cast<std::size_t>(target.index);
        if (options.cuda.arena) {
          placed.data = arenas.bases[d] + arenas.offsets[i];
          placed.owner = arenas.owners[d];
        } else {
          placed.owner = detail::cuda_allocate(target.index, s.nbytes, &placed.data, who);
        }
        jobs.push_back({checkpoint.storage_bytes(i), swap_unit_for(checkpoint, s), placed.data, target.index, who});
        break;
      }
    }
  }
  if (!jobs.empty()) detail::cuda_upload(jobs, options.cuda);
  return out;
}

}  // namespace maploc::remap
