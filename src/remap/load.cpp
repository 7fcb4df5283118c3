// load.cpp - remap::load, the one load pipeline: plan; the storages to place (each whole, or the segments
// of one a rank owns, parts.h); for each, where its bytes are; place it (a view, a host copy, a device upload).
#include <algorithm>
#include <optional>
#include <thread>

#include "maploc/error.h"
#include "maploc/remap/loaded.h"
#include "support/memory_guard.h"
#include "maploc/remap/plan.h"
#include "file_for_reads.h"
#include "host_memory.h"
#include "part_reads.h"
#include "parts.h"
#include "remote_reads.h"
#include "storage_names.h"
#include "upload.h"
#include "support/flat_index.h"

namespace maploc::remap {
namespace {

using detail::Part;

constexpr std::uint64_t kArenaAlignment = 256;

std::size_t swap_unit_for(const torch::Checkpoint& checkpoint, const torch::Storage& s) {
  return checkpoint.byteorder() == torch::ByteOrder::kBig ? torch::swap_unit(s.dtype) : 1;
}

// One allocation per CUDA device holding its parts at aligned offsets.
struct Arenas {
  std::vector<std::shared_ptr<void>> owners;   // per device index
  std::vector<std::uint8_t*> bases;
  std::vector<std::uint64_t> offsets;           // per part
};

Arenas make_arenas(const Plan& plan, const std::vector<Part>& parts, const DeviceInventory& inventory) {
  const int device_count = inventory.cuda_device_count;
  Arenas a;
  a.owners.resize(static_cast<std::size_t>(device_count));
  a.bases.resize(static_cast<std::size_t>(device_count), nullptr);
  a.offsets.resize(parts.size(), 0);
  std::vector<std::uint64_t> sizes(static_cast<std::size_t>(device_count), 0);
  for (std::size_t k = 0; k < parts.size(); ++k) {
    const Device& target = plan.targets[parts[k].parent];
    if (target.kind != Device::Kind::kCuda) continue;
    auto& size = sizes[static_cast<std::size_t>(target.index)];
    a.offsets[k] = size;
    size += (parts[k].nbytes + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment;
  }
  for (int d = 0; d < device_count; ++d) {
    const auto ud = static_cast<std::size_t>(d);
    if (sizes[ud] == 0) continue;
    void* base = nullptr;
    a.owners[ud] = detail::device_allocate(inventory.backend, d, sizes[ud], &base,
                                           "the arena of cuda:" + std::to_string(d) + " (" +
                                               std::to_string(sizes[ud]) + " bytes for its storages)");
    a.bases[ud] = static_cast<std::uint8_t*>(base);
  }
  return a;
}

// The plan's totals for what is placed: the parts (a rank's slices of storages, or whole storages).
void count_parts(Plan& plan, const std::vector<Part>& parts) {
  for (auto& t : plan.totals) t.bytes = t.storages = 0;
  for (const Part& p : parts) {
    for (auto& t : plan.totals) {
      if (t.device != plan.targets[p.parent]) continue;
      t.bytes += p.nbytes;
      ++t.storages;
      break;
    }
  }
}

// A private writable mapping of the checkpoint file, or nothing when the
// checkpoint is not a plain file (then writable placements are copies).
std::optional<Bytes> copy_on_write_mapping(const torch::Checkpoint& checkpoint) {
  if (checkpoint.format() == torch::Format::kSet || checkpoint.format() == torch::Format::kDcp) {
    return std::nullopt;  // path() names the index or directory, not the data
  }
  try {
    return MappedFile::open_copy_on_write(checkpoint.path()).bytes;
  } catch (const Error&) {
    return std::nullopt;
  }
}

// Where storage i lies plainly in the checkpoint's own file (FileForReads' descriptor), or -1.
std::int64_t offset_in_file(const torch::Checkpoint& checkpoint, std::size_t i) {
  const auto offset = checkpoint.storage_file_offset(i);
  return offset ? static_cast<std::int64_t>(*offset) : -1;
}

unsigned host_threads_of(const LoadOptions& options) {
  if (options.host_threads != 0) return options.host_threads;
  return std::clamp(std::thread::hardware_concurrency(), 1u, 8u);
}

// LoadOptions::strict: what torch.load returns must all come out, named.
void require_complete(const torch::Checkpoint& checkpoint) {
  if (const auto& u = checkpoint.unreferenced_storages(); !u.empty()) {
    const auto& s = checkpoint.storages()[u.front()];
    throw Error(ErrorCode::kTorchIncomplete, Stage::kRemap,
                checkpoint.path() + ": " + std::to_string(u.size()) + " storage(s) reached by no tensor maploc names, "
                "the first '" + s.key + "' (" + s.record + "); strict loads refuse them", std::nullopt, s.key);
  }
  if (const auto& r = checkpoint.unknown_rebuilds(); !r.empty()) {
    throw Error(ErrorCode::kTorchIncomplete, Stage::kRemap,
                checkpoint.path() + ": a call of " + r.front() + ", a rebuild function maploc does not know; strict "
                "loads refuse it", std::nullopt, r.front());
  }
}

// Pinned host memory needs a device runtime.
void check_pinned(const DeviceInventory& inventory, const LoadOptions& options) {
  if (options.host == HostMemory::kPinned && !inventory.cuda_built) {
    throw Error(ErrorCode::kRemapCudaNotBuilt, Stage::kRemap,
                "pinned host memory needs a build with CUDA; use owned copies or mapped views instead");
  }
  if (options.host == HostMemory::kPinned && inventory.cuda_device_count == 0) {
    throw Error(ErrorCode::kRemapCudaUnavailable, Stage::kRemap,
                "pinned host memory needs a CUDA device, but " +
                    (inventory.cuda_note.empty() ? std::string("none is present") : inventory.cuda_note) +
                    "; use owned copies or mapped views instead");
  }
}

// Storages placed on CUDA devices need a build with CUDA and a runtime.
void check_cuda(const DeviceInventory& inventory, const Plan& plan) {
  const bool any_cuda = std::any_of(plan.totals.begin(), plan.totals.end(), [](const DeviceTotal& t) {
    return t.device.kind == Device::Kind::kCuda && t.storages != 0;
  });
  if (any_cuda && !inventory.cuda_built) {
    throw Error(ErrorCode::kRemapCudaNotBuilt, Stage::kRemap,
                "the plan places storages on CUDA devices, but this maploc was built without CUDA "
                "(configure with -DMAPLOC_CUDA=ON, or map them to cpu)");
  }
  if (any_cuda && !inventory.backend) {
    throw Error(ErrorCode::kRemapCudaUnavailable, Stage::kRemap,
                "the plan places storages on CUDA devices, but no device runtime is available" +
                    (inventory.cuda_note.empty() ? std::string() : " (" + inventory.cuda_note + ")") +
                    "; map them to cpu");
  }
}

// One load in progress: what it was asked, and what it has placed and has yet to fill.
class Pipeline {
 public:
  Pipeline(const torch::Checkpoint& checkpoint, const LoadOptions& options, const DeviceInventory& inventory)
      : checkpoint_(checkpoint), options_(options), inventory_(inventory) {}

  // The tensors handed out, over the storages placed (filled, or views).
  struct Placed {
    std::shared_ptr<const std::vector<torch::Tensor>> tensors;
    std::vector<PlacedStorage> storages;
  };

  Placed run() {
    plan_ = make_plan(checkpoint_, options_.map, inventory_);
    detail::Parts parts = options_.slice ? detail::slice_parts(checkpoint_, *options_.slice, report_)
                                         : detail::whole_parts(checkpoint_);
    parts_ = std::move(parts.parts);
    count_parts(plan_, parts_);
    check_fits(plan_);
    check_cuda(inventory_, plan_);
    if (options_.writable && options_.host == HostMemory::kMappedView && !checkpoint_.remote_transfer()) {
      cow_ = copy_on_write_mapping(checkpoint_);
    }
    fetch_sources();
    allocate_arenas();
    std::vector<PlacedStorage> placed(parts_.size());
    for (std::size_t k = 0; k < parts_.size(); ++k) placed[k] = place(k);
    if (options_.slice_report) *options_.slice_report = slice_report();
    fill(placed);
    return {std::move(parts.tensors), std::move(placed)};
  }

 private:
  const Device& target(const Part& p) const { return plan_.targets[p.parent]; }

  // Whether part p placed on the host gets its own copy (not a view of the file).
  bool host_copies(const Part& p) const {
    if (!p.whole || options_.host == HostMemory::kPinned || options_.host == HostMemory::kOwnedCopy ||
        swap_unit_for(checkpoint_, checkpoint_.storages()[p.parent]) > 1) {
      return true;
    }
    if (!options_.writable) return false;
    const std::int64_t at = cow_ ? offset_in_file(checkpoint_, p.parent) : -1;
    return at < 0 || static_cast<std::uint64_t>(at) > cow_->size() || p.nbytes > cow_->size() - static_cast<std::uint64_t>(at);
  }

  // A URL source: copies and uploads stream their bytes straight to their destination; the rest
  // (views of the object, deflated records) are fetched now, several requests in flight.
  void fetch_sources() {
    const std::size_t count = checkpoint_.storages().size();
    std::vector<bool> wanted(count, false), used(count, false);
    for (const Part& p : parts_) {
      if (target(p).kind == Device::Kind::kMeta) continue;
      used[p.parent] = true;
      if (target(p).kind == Device::Kind::kCuda || host_copies(p)) wanted[p.parent] = true;
    }
    streams_ = detail::remote_reads(checkpoint_, wanted);
    std::vector<std::size_t> fetch_now;
    for (std::size_t i : streams_.others) {
      if (used[i]) fetch_now.push_back(i);
    }
    checkpoint_.prefetch(fetch_now);
    reads_.emplace(checkpoint_, streams_);
  }

  // Device arenas (options.cuda.arena); private copies on the host share one mapping in huge pages
  // (host_memory.h, HostArena); pinned copies share one page-locked allocation.
  void allocate_arenas() {
    if (options_.cuda.arena && std::any_of(parts_.begin(), parts_.end(), [&](const Part& p) {
          return target(p).kind == Device::Kind::kCuda;
        })) {
      arenas_ = make_arenas(plan_, parts_, inventory_);
    }
    if (options_.host != HostMemory::kOwnedCopy && options_.host != HostMemory::kPinned) return;
    std::uint64_t total = 0;
    for (const Part& p : parts_) {
      if (target(p).kind == Device::Kind::kCpu && host_copies(p)) total += detail::host_arena_slice(p.nbytes);
    }
    host_arena_ = options_.host == HostMemory::kPinned
                      ? detail::pinned_arena(inventory_.backend, total, "the pinned copies of " + checkpoint_.path())
                      : detail::host_arena(total, "the private copies of " + checkpoint_.path());
  }

  // "storage '3' of tensor 'fc.weight'": the names are built on first use (a mapped view never names its storage).
  std::string who(const Part& p) {
    if (!names_) names_ = detail::storage_tensor_names(checkpoint_);
    std::string s = detail::describe_storage(checkpoint_.storages()[p.parent], (*names_)[p.parent]);
    if (p.whole) return s;
    return "a slice of " + s;
  }

  // What a copy of part p reads: a reader (its URL stream, the segments of a slice), or the storage's
  // bytes as on disk and where they lie in the checkpoint's file (-1: copied from memory).
  struct CopySource {
    Bytes raw;
    std::int64_t file_offset = -1;
    detail::StorageReader read;
  };
  CopySource copy_source(const Part& p) {
    if (!p.whole || reads_->streamed(p.parent)) return {Bytes(), -1, reads_->reader(p)};
    return {checkpoint_.storage_bytes(p.parent), offset_in_file(checkpoint_, p.parent), {}};
  }

  PlacedStorage place(std::size_t k) {
    const Part& p = parts_[k];
    const Device& to = target(p);
    if (to.kind == Device::Kind::kCpu) return place_on_host(p);
    PlacedStorage placed;
    placed.device = to;
    placed.nbytes = p.nbytes;
    if (to.kind == Device::Kind::kMeta) return placed;
    const std::string name = who(p);
    placed.writable = true;
    const auto d = static_cast<std::size_t>(to.index);
    if (options_.cuda.arena) {
      placed.data = arenas_.bases[d] + arenas_.offsets[k];
      placed.owner = arenas_.owners[d];
    } else {
      placed.owner = detail::device_allocate(inventory_.backend, to.index, p.nbytes, &placed.data, name);
    }
    CopySource src = copy_source(p);
    const std::size_t unit = swap_unit_for(checkpoint_, checkpoint_.storages()[p.parent]);
    const std::uint64_t read_size = src.read ? p.nbytes : 0;
    jobs_.push_back({std::move(src.raw), src.file_offset, unit, placed.data, to.index, name, std::move(src.read),
                     read_size});
    return placed;
  }

  // Copies get their buffer now and a HostFill for fill(), which reads them all at once after every allocation.
  PlacedStorage place_on_host(const Part& p) {
    if (!host_copies(p)) {
      if (!options_.writable) return detail::host_view(checkpoint_.storage_bytes(p.parent));
      return detail::host_cow_view(*cow_, static_cast<std::uint64_t>(offset_in_file(checkpoint_, p.parent)), p.nbytes);
    }
    const bool in_arena = options_.host == HostMemory::kOwnedCopy || options_.host == HostMemory::kPinned;
    const std::string name = who(p);
    PlacedStorage placed =
        in_arena ? detail::host_allocate(host_arena_, p.nbytes, name) : detail::host_allocate(p.nbytes, nullptr, name);
    if (p.nbytes == 0) return placed;
    CopySource src = copy_source(p);
    const std::size_t unit = swap_unit_for(checkpoint_, checkpoint_.storages()[p.parent]);
    const std::uint64_t read_size = src.read ? p.nbytes : 0;
    fills_.push_back({static_cast<std::uint8_t*>(placed.data), std::move(src.raw), unit, src.file_offset,
                      std::move(src.read), read_size});
    return placed;
  }

  // What a sliced load read: the bytes of its parts from files (or by URL), and the storages made whole in memory.
  SliceReport slice_report() {
    SliceReport r = report_;
    std::vector<bool> counted(checkpoint_.storages().size(), false);
    for (const Part& p : parts_) {
      if (target(p).kind == Device::Kind::kMeta) continue;
      if (!reads_->from_memory(p.parent)) {
        r.bytes_from_files += p.nbytes;
      } else if (!counted[p.parent]) {
        counted[p.parent] = true;
        r.bytes_from_memory += checkpoint_.storages()[p.parent].nbytes;
      }
    }
    return r;
  }

  // Reads every copy and upload (the progress meter counts them all), and populates views when asked.
  void fill(std::vector<PlacedStorage>& placed) {
    std::uint64_t to_copy = 0;
    for (const auto& f : fills_) to_copy += f.size();
    for (const auto& j : jobs_) to_copy += j.size();
    maploc::detail::ProgressMeter meter(options_.progress, to_copy);
    if (!fills_.empty()) {
      const detail::FileForReads file(checkpoint_, fills_);
      detail::fill_host(fills_, file.fd(), std::max(host_threads_of(options_), streams_.parallel), &meter);
    }
    if (options_.populate && options_.host == HostMemory::kMappedView) {
      detail::populate_host(placed, host_threads_of(options_),
                            [&](std::size_t k) { return who(parts_[k]); });
    }
    if (!jobs_.empty()) {
      const detail::FileForReads file(checkpoint_, jobs_);
      CudaOptions cuda = options_.cuda;  // a URL source: as many readers as requests to keep in flight
      cuda.reader_threads = std::max(cuda.reader_threads, streams_.parallel);
      detail::upload(*inventory_.backend, jobs_, file.fd(), cuda,
                     options_.cuda.arena ? detail::Destinations::kOwnArena : detail::Destinations::kSeparate, &meter);
    }
  }

  const torch::Checkpoint& checkpoint_;
  const LoadOptions& options_;
  const DeviceInventory& inventory_;
  Plan plan_;
  std::vector<Part> parts_;
  SliceReport report_;
  std::optional<Bytes> cow_;
  detail::RemoteReads streams_;
  std::optional<detail::PartReads> reads_;
  Arenas arenas_;
  detail::HostArena host_arena_;
  std::optional<std::vector<std::vector<std::string>>> names_;
  std::vector<detail::HostFill> fills_;
  std::vector<detail::UploadJob> jobs_;
};

}  // namespace

Loaded load(const torch::Checkpoint& checkpoint, const LoadOptions& options) {
  return maploc::detail::guard_memory(Stage::kRemap, checkpoint.path(), [&] {
    if (options.strict) require_complete(checkpoint);
    const DeviceInventory& inventory = options.inventory ? *options.inventory : DeviceInventory::probe();
    check_pinned(inventory, options);
    // load() selects devices to allocate and copy: the caller's current device comes back on every path.
    const detail::DeviceGuard guard(inventory.backend.get());
    Pipeline::Placed placed = Pipeline(checkpoint, options, inventory).run();
    Loaded out;
    auto by_name = std::make_shared<maploc::detail::FlatIndex>(placed.tensors->size());
    for (std::size_t t = 0; t < placed.tensors->size(); ++t) {
      const std::string& name = (*placed.tensors)[t].name;  // a repeated name keeps its first tensor
      by_name->insert_unique(maploc::detail::hash_text(name), static_cast<std::uint32_t>(t),
                             [&](std::uint32_t k) { return (*placed.tensors)[k].name == name; });
    }
    out.tensors_ = std::move(placed.tensors);
    out.storages_ = std::move(placed.storages);
    out.by_name_ = std::move(by_name);
    out.inventory_ = inventory;
    out.cuda_ = options.cuda;
    out.max_expanded_bytes_ = checkpoint.limits().torch_max_expanded_bytes;
    return out;
  });
}

}  // namespace maploc::remap
