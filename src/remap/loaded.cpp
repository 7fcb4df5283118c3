// loaded.cpp - after the load: devices of tensors, moving storages, hashes, load_into.
#include <algorithm>
#include <cstring>

#include "maploc/error.h"
#include "maploc/remap/loaded.h"
#include "support/sha256.h"
#include "maploc/torch/hash.h"
#include "host_memory.h"
#include "upload.h"
#include "support/flat_index.h"

namespace maploc::remap {
namespace {

std::string storage_who(std::size_t storage, const std::vector<torch::Tensor>& tensors) {
  for (const auto& t : tensors) {
    if (t.storage == storage) return "storage #" + std::to_string(storage) + " of tensor '" + t.name + "'";
  }
  return "storage #" + std::to_string(storage);
}

// A placed storage's bytes on the host. The tensor that names the storage in a
// message is looked for only where a message may need it (a copy from CUDA, meta):
// a scan of every tensor per call made hashing every tensor quadratic.
Bytes host_bytes_named(const PlacedStorage& placed, std::size_t storage, const std::vector<torch::Tensor>& tensors,
                       DeviceBackend* backend, const CudaOptions& options) {
  return detail::host_bytes_of(
      placed, placed.device.kind == Device::Kind::kCpu ? std::string() : storage_who(storage, tensors), backend,
      options);
}

std::string shape_str(std::span<const std::int64_t> shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

std::string name_list(const std::vector<std::string>& names) {
  std::string out;
  const std::size_t shown = std::min<std::size_t>(names.size(), 10);
  for (std::size_t i = 0; i < shown; ++i) out += (i ? ", '" : "'") + names[i] + "'";
  if (names.size() > shown) out += " and " + std::to_string(names.size() - shown) + " more";
  return out;
}

// Every destination is memory of the kind it claims: device memory of its
// device for CUDA, and never device memory for the CPU (pointer attributes).
void check_destinations(std::span<const Destination> destinations, const std::vector<std::size_t>& matched,
                        DeviceBackend* backend) {
  for (std::size_t d = 0; d < destinations.size(); ++d) {
    const Destination& dst = destinations[d];
    if (matched[d] == SIZE_MAX || dst.device.kind == Device::Kind::kMeta) continue;
    // Nothing is written to a tensor of no elements: its pointer may be anything, null included
    // (torch gives empty CUDA tensors a null data pointer).
    if (std::any_of(dst.shape.begin(), dst.shape.end(), [](std::int64_t n) { return n == 0; })) continue;
    if (backend == nullptr || backend->device_count() == 0) {
      // Without a device there is no device memory to mistake for the host's.
      if (dst.device.kind == Device::Kind::kCpu) continue;
      throw Error(ErrorCode::kRemapCudaUnavailable, Stage::kRemap,
                  "the destination of tensor '" + dst.name + "' is on " + dst.device.str() +
                      " but no device runtime is available");
    }
    DeviceBackend::PointerInfo info;
    detail::check_device(*backend, backend->pointer_info(dst.data, &info),
                         "asking what memory the destination of tensor '" + dst.name + "' is");
    const bool on_device = info.kind == DeviceBackend::PointerKind::kDevice;
    if (dst.device.kind == Device::Kind::kCuda ? !on_device || info.device != dst.device.index : on_device) {
      throw Error(ErrorCode::kInvalidArgument, Stage::kRemap,
                  "the destination of tensor '" + dst.name + "' is said to be on " + dst.device.str() + " but it is " +
                      (on_device ? "device memory of cuda:" + std::to_string(info.device) : std::string("host memory")) +
                      "; pass the device the buffer was allocated on");
    }
  }
}

// Public entry points take indices from callers: out of range is maploc::Error, not std::out_of_range.
void check_index(std::size_t index, std::size_t count, const char* what) {
  if (index >= count) {
    throw Error(ErrorCode::kInvalidArgument, Stage::kRemap,
                std::string(what) + " index " + std::to_string(index) + " out of range (the load has " +
                    std::to_string(count) + ")");
  }
}

}  // namespace

Device Loaded::device_of(std::size_t tensor) const {
  check_index(tensor, tensors_->size(), "tensor");
  const auto& t = (*tensors_)[tensor];
  if (t.storage) return storages_[*t.storage].device;
  return t.kind == torch::TensorKind::kMeta ? Device::meta() : Device::cpu();
}

std::optional<std::size_t> Loaded::find(std::string_view name) const {
  if (!by_name_) return std::nullopt;
  return by_name_->find(maploc::detail::hash_text(name), [&](std::uint32_t t) { return (*tensors_)[t].name == name; });
}

void Loaded::to(const Device& device, std::string_view name_glob) {
  // Storages to move: those viewed by a matching tensor, each once.
  std::vector<std::size_t> moving;
  std::vector<std::vector<std::string>> names;
  std::vector<std::size_t> slot(storages_.size(), SIZE_MAX);  // storage -> index in moving (not a scan: n^2)
  for (const auto& t : *tensors_) {
    if (!t.storage || !glob_match(name_glob, t.name) || storages_[*t.storage].device == device) continue;
    if (slot[*t.storage] == SIZE_MAX) {
      slot[*t.storage] = moving.size();
      moving.push_back(*t.storage);
      names.emplace_back();
    }
    names[slot[*t.storage]].push_back(t.name);
  }
  if (moving.empty()) return;
  // The same checks as load(): CUDA present, index in range (names the storage).
  std::vector<std::string> keys;  // StorageRef holds views: keep the strings alive
  for (std::size_t k : moving) keys.push_back("#" + std::to_string(k));
  std::vector<StorageRef> refs;
  for (std::size_t k = 0; k < moving.size(); ++k) {
    refs.push_back({keys[k], "", storages_[moving[k]].nbytes, "", names[k]});
  }
  decide(refs, MapLocation::all_to(device.str()), inventory_);

  // Build every new placement first, commit only when all succeeded.
  DeviceBackend* backend = inventory_.backend.get();
  const detail::DeviceGuard guard(backend);
  std::vector<PlacedStorage> placed(moving.size());
  std::vector<std::string> who(moving.size());
  for (std::size_t k = 0; k < moving.size(); ++k) {  // named by a tensor that moves it (a scan per storage was n^2)
    who[k] = "storage #" + std::to_string(moving[k]) + " of tensor '" + names[k].front() + "'";
  }
  // To a CUDA device: one allocation for all, storages at aligned offsets.
  std::shared_ptr<void> block;
  std::vector<std::uint64_t> offsets(moving.size(), 0);
  if (device.kind == Device::Kind::kCuda) {
    std::uint64_t total = 0;
    for (std::size_t k = 0; k < moving.size(); ++k) {
      offsets[k] = total;
      total += (storages_[moving[k]].nbytes + 255) / 256 * 256;
    }
    void* base = nullptr;
    block = detail::device_allocate(inventory_.backend, device.index, total, &base,
                                    who.front() + (moving.size() > 1 ? " and the " + std::to_string(moving.size() - 1) +
                                                                           " other storage(s) moving with it"
                                                                     : std::string()));
    for (std::size_t k = 0; k < moving.size(); ++k) {
      placed[k].data = static_cast<std::uint8_t*>(base) + offsets[k];
      placed[k].owner = block;
    }
  }
  std::vector<detail::UploadJob> jobs;
  std::vector<detail::PeerCopy> peers;
  std::vector<detail::DownloadJob> downloads;
  for (std::size_t k = 0; k < moving.size(); ++k) {
    const PlacedStorage& from = storages_[moving[k]];
    placed[k].device = device;
    placed[k].nbytes = from.nbytes;
    placed[k].writable = device.kind != Device::Kind::kMeta;
    switch (device.kind) {
      case Device::Kind::kMeta: break;
      case Device::Kind::kCpu:
        if (from.device.kind == Device::Kind::kCuda) {  // straight into its new host buffer
          placed[k] = detail::host_allocate(from.nbytes, nullptr, who[k]);
          downloads.push_back({from.data, from.device.index, static_cast<std::uint8_t*>(placed[k].data), from.nbytes, who[k]});
        } else {
          placed[k] = detail::host_copy(detail::host_bytes_of(from, who[k], backend, cuda_), 1, nullptr, who[k]);
        }
        break;
      case Device::Kind::kCuda:
        if (from.device.kind == Device::Kind::kCuda) {  // device to device, never through the host
          peers.push_back({placed[k].data, device.index, from.data, from.device.index, from.nbytes, who[k]});
        } else {
          jobs.push_back({detail::host_bytes_of(from, who[k], backend, cuda_), -1, 1, placed[k].data, device.index, who[k]});
        }
        break;
    }
  }
  if (!downloads.empty()) detail::download(*backend, downloads, cuda_);  // all at once, through the ring
  if (!peers.empty()) detail::device_copy(*backend, peers, cuda_);
  if (!jobs.empty()) detail::upload(*backend, jobs, -1, cuda_, detail::Destinations::kSeparate);
  for (std::size_t k = 0; k < moving.size(); ++k) storages_[moving[k]] = std::move(placed[k]);
}

std::vector<std::uint8_t> Loaded::host_bytes(std::size_t storage) const {
  check_index(storage, storages_.size(), "storage");
  const Bytes b = host_bytes_named(storages_[storage], storage, *tensors_, inventory_.backend.get(), cuda_);
  return std::vector<std::uint8_t>(b.data(), b.data() + b.size());
}

std::string Loaded::tensor_sha256(std::size_t tensor) const {
  check_index(tensor, tensors_->size(), "tensor");
  const auto& t = (*tensors_)[tensor];
  if (!t.storage) {
    throw Error(ErrorCode::kInvalidArgument, Stage::kRemap,
                "tensor '" + t.name + "' has no storage of its own (kind " +
                    std::string(torch::tensor_kind_name(t.kind)) + "); hash its components instead");
  }
  const Bytes bytes = host_bytes_named(storages_[*t.storage], *t.storage, *tensors_, inventory_.backend.get(), cuda_);
  Sha256 sha;
  torch::for_each_value_chunk(
      t, bytes, torch::ByteOrder::kLittle, [&](std::span<const std::uint8_t> chunk) { sha.update(chunk); },
      max_expanded_bytes_);
  return sha.finish_hex();
}

LoadIntoReport Loaded::load_into(std::span<const Destination> destinations, bool strict) const {
  LoadIntoReport report;
  std::vector<std::size_t> matched(destinations.size(), SIZE_MAX);
  std::vector<bool> wanted(tensors_->size(), false);
  for (std::size_t d = 0; d < destinations.size(); ++d) {
    const Destination& dst = destinations[d];
    const auto idx = find(dst.name);
    if (!idx || !(*tensors_)[*idx].storage) {
      report.missing.push_back(dst.name);
      continue;
    }
    const torch::Tensor& t = (*tensors_)[*idx];
    if (t.dtype != dst.dtype || t.shape != dst.shape) {
      throw Error(ErrorCode::kRemapStateDictMismatch, Stage::kRemap,
                  "tensor '" + t.name + "' is " + std::string(torch::dtype_name(t.dtype)) + " " + shape_str(t.shape) +
                      " in the checkpoint but the destination is " + std::string(torch::dtype_name(dst.dtype)) + " " +
                      shape_str(dst.shape));
    }
    matched[d] = *idx;
    wanted[*idx] = true;
  }
  for (std::size_t i = 0; i < tensors_->size(); ++i) {
    const torch::Tensor& t = (*tensors_)[i];
    if (!wanted[i] && !t.is_component && t.storage) report.unexpected.push_back(t.name);
  }
  if (strict && (!report.missing.empty() || !report.unexpected.empty())) {
    std::string msg = "load_into (strict):";
    if (!report.missing.empty()) msg += " missing in the checkpoint: " + name_list(report.missing) + ";";
    if (!report.unexpected.empty()) msg += " unexpected in the checkpoint: " + name_list(report.unexpected) + ";";
    throw Error(ErrorCode::kRemapStateDictMismatch, Stage::kRemap,
                msg + " pass strict=false to load the names that match");
  }
  DeviceBackend* backend = inventory_.backend.get();
  const detail::DeviceGuard guard(backend);
  check_destinations(destinations, matched, backend);
  std::vector<detail::UploadJob> jobs;
  for (std::size_t d = 0; d < destinations.size(); ++d) {
    if (matched[d] == SIZE_MAX) continue;
    const torch::Tensor& t = (*tensors_)[matched[d]];
    const Destination& dst = destinations[d];
    const Bytes bytes = host_bytes_named(storages_[*t.storage], *t.storage, *tensors_, backend, cuda_);
    std::vector<std::uint8_t> staged;
    auto* out = static_cast<std::uint8_t*>(dst.data);
    if (dst.device.kind != Device::Kind::kCpu) out = nullptr;
    torch::for_each_value_chunk(t, bytes, torch::ByteOrder::kLittle, [&](std::span<const std::uint8_t> chunk) {
      if (out != nullptr) {
        std::memcpy(out, chunk.data(), chunk.size());
        out += chunk.size();
      } else {
        staged.insert(staged.end(), chunk.begin(), chunk.end());
      }
    }, max_expanded_bytes_);
    if (dst.device.kind == Device::Kind::kCuda) {
      jobs.push_back({Bytes::owned(std::move(staged)), -1, 1, dst.data, dst.device.index, "tensor '" + t.name + "'"});
    }
    report.loaded.push_back(dst.name);
  }
  if (!jobs.empty()) detail::upload(*backend, jobs, -1, cuda_, detail::Destinations::kSeparate);
  return report;
}

}  // namespace maploc::remap
