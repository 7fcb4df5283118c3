// load.cpp - remap::load: plan, allocate every storage where the plan says, fill it from the file.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <thread>

#include "maploc/error.h"
#include "maploc/remap/loaded.h"
#include "support/memory_guard.h"
#include "maploc/remap/plan.h"
#include "host_memory.h"
#include "load_slice.h"
#include "remote_reads.h"
#include "storage_names.h"
#include "upload.h"
#include "support/flat_index.h"

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

Arenas make_arenas(const torch::Checkpoint& checkpoint, const Plan& plan, const DeviceInventory& inventory) {
  const int device_count = inventory.cuda_device_count;
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
    a.owners[ud] = detail::device_allocate(inventory.backend, d, sizes[ud], &base,
                                           "the arena of cuda:" + std::to_string(d) + " (" +
                                               std::to_string(sizes[ud]) + " bytes for its storages)");
    a.bases[ud] = static_cast<std::uint8_t*>(base);
  }
  return a;
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

// Where raw lies in the file, when it is a plain (stored, not inflated) range
// of a zip archive's mapping; -1 otherwise (then it is copied from raw).
std::int64_t file_offset_of(const torch::Checkpoint& checkpoint, const torch::Storage& s, const Bytes& raw) {
  const zip::Archive* archive = checkpoint.archive();
  if (archive == nullptr || s.compressed || s.view_of) return -1;
  const Bytes& file = archive->file_bytes();
  if (raw.data() < file.data() || s.file_offset > file.size() || raw.size() > file.size() - s.file_offset ||
      static_cast<std::uint64_t>(raw.data() - file.data()) != s.file_offset) {
    return -1;
  }
  return static_cast<std::int64_t>(s.file_offset);
}

// Whether storage i placed on the host gets its own copy (not a view of the file).
bool host_copies(const torch::Checkpoint& checkpoint, std::size_t i, const LoadOptions& options,
                 const std::optional<Bytes>& cow) {
  const torch::Storage& s = checkpoint.storages()[i];
  if (options.host == HostMemory::kPinned || options.host == HostMemory::kOwnedCopy || swap_unit_for(checkpoint, s) > 1) {
    return true;
  }
  return options.writable && !(cow && !s.compressed && s.file_offset <= cow->size() && s.nbytes <= cow->size() - s.file_offset);
}

// Places storage i on the host. Copies get their buffer now and a HostFill
// for fill_host(), which reads them all at once after every allocation;
// `stream` (a URL source) reads a copy's bytes instead of the file's.
template <class Names>
PlacedStorage place_on_host(const torch::Checkpoint& checkpoint, std::size_t i, const LoadOptions& options,
                            const std::optional<Bytes>& cow, Names& names, std::vector<detail::HostFill>& fills,
                            detail::HostArena& arena, const detail::StorageReader& stream) {
  const torch::Storage& s = checkpoint.storages()[i];
  const std::size_t unit = swap_unit_for(checkpoint, s);
  if (!host_copies(checkpoint, i, options, cow)) {
    const Bytes raw = checkpoint.storage_bytes(i);
    if (!options.writable) return detail::host_view(raw);
    return detail::host_cow_view(*cow, s.file_offset, s.nbytes);
  }
  const Bytes raw = stream ? Bytes() : checkpoint.storage_bytes(i);
  const std::uint64_t n = stream ? s.nbytes : raw.size();
  const std::string who = detail::describe_storage(s, names(i));
  const bool in_arena = options.host == HostMemory::kOwnedCopy || options.host == HostMemory::kPinned;
  PlacedStorage placed = in_arena ? detail::host_allocate(arena, n, who) : detail::host_allocate(n, nullptr, who);
  if (stream && n != 0) {
    fills.push_back({static_cast<std::uint8_t*>(placed.data), Bytes(), unit, -1, stream, n});
  } else if (!raw.empty()) {
    fills.push_back({static_cast<std::uint8_t*>(placed.data), raw, unit, file_offset_of(checkpoint, s, raw)});
  }
  return placed;
}

// A descriptor of the checkpoint's file for fill_host()'s preads, or -1 when
// the path no longer names the file that was mapped (moved, replaced,
// resized) or nothing is to be read from it. The mapping stays the source of truth.
class FileForReads {
 public:
  FileForReads(const torch::Checkpoint& checkpoint, const std::vector<detail::HostFill>& fills) {
    const auto first = std::find_if(fills.begin(), fills.end(), [](const auto& f) { return f.file_offset >= 0; });
    if (first == fills.end()) return;
    open_checked(checkpoint, first->file_offset, first->src);
  }
  FileForReads(const torch::Checkpoint& checkpoint, const std::vector<detail::UploadJob>& jobs) {
    const auto first = std::find_if(jobs.begin(), jobs.end(), [](const auto& j) { return j.file_offset >= 0; });
    if (first == jobs.end()) return;
    open_checked(checkpoint, first->file_offset, first->source);
  }
  ~FileForReads() { close(); }
  FileForReads(const FileForReads&) = delete;
  FileForReads& operator=(const FileForReads&) = delete;
  int fd() const noexcept { return fd_; }

 private:
  void open_checked(const torch::Checkpoint& checkpoint, std::int64_t offset, const Bytes& src) {
    if (checkpoint.archive() == nullptr) return;
    fd_ = ::open(checkpoint.path().c_str(), O_RDONLY | O_CLOEXEC);
    struct stat st {};
    const std::uint64_t mapped = checkpoint.archive()->file_bytes().size();
    if (fd_ >= 0 && ::fstat(fd_, &st) == 0 && S_ISREG(st.st_mode) && static_cast<std::uint64_t>(st.st_size) < mapped) {
      // Shorter than when it was mapped: copying from the mapping would raise SIGBUS.
      close();
      throw Error(ErrorCode::kIoRead, Stage::kRemap,
                  "the checkpoint file is now " + std::to_string(st.st_size) + " bytes, " + std::to_string(mapped) +
                      " when it was opened: it was truncated or replaced after it was opened; open it again",
                  std::nullopt, checkpoint.path());
    }
    if (fd_ < 0 || ::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode) ||
        static_cast<std::uint64_t>(st.st_size) != mapped || !same_bytes(offset, src)) {
      close();
    }
  }
  // The first bytes of one storage read through the descriptor equal the mapping's.
  bool same_bytes(std::int64_t offset, const Bytes& src) const {
    std::uint8_t probe[4096];
    const std::size_t n = std::min<std::size_t>(sizeof probe, src.size());
    return ::pread(fd_, probe, n, static_cast<off_t>(offset)) == static_cast<ssize_t>(n) &&
           std::memcmp(probe, src.data(), n) == 0;
  }
  void close() noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  int fd_ = -1;
};

unsigned host_threads_of(const LoadOptions& options) {
  if (options.host_threads != 0) return options.host_threads;
  return std::clamp(std::thread::hardware_concurrency(), 1u, 8u);
}

}  // namespace

// LoadOptions::strict: what torch.load returns must all come out, named.
static void require_complete(const torch::Checkpoint& checkpoint) {
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

Loaded load(const torch::Checkpoint& checkpoint, const LoadOptions& options) {
  return maploc::detail::guard_memory(Stage::kRemap, checkpoint.path(), [&] {
    if (options.strict) require_complete(checkpoint);
    if (options.slice) return load_sliced(checkpoint, options);
    const DeviceInventory& inventory = options.inventory ? *options.inventory : DeviceInventory::probe();
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
    // load() selects devices to allocate and copy: the caller's current device comes back on every path.
    const detail::DeviceGuard guard(inventory.backend.get());
    const Plan plan = make_plan(checkpoint, options.map, inventory);
    check_fits(plan);

    // Tensor names per storage are for messages only: built on first use (not for mapped views).
    std::optional<std::vector<std::vector<std::string>>> names_cache;
    auto names = [&](std::size_t i) -> const std::vector<std::string>& {
      if (!names_cache) names_cache = detail::storage_tensor_names(checkpoint);
      return (*names_cache)[i];
    };
    const auto& storages = checkpoint.storages();
    Loaded out;
    out.tensors_ = checkpoint.shared_tensors();
    out.inventory_ = inventory;
    out.cuda_ = options.cuda;
    out.max_expanded_bytes_ = checkpoint.limits().torch_max_expanded_bytes;
    out.storages_.resize(storages.size());
    auto by_name = std::make_shared<maploc::detail::FlatIndex>(out.tensors_->size());
    for (std::size_t t = 0; t < out.tensors_->size(); ++t) {
      const std::string& name = (*out.tensors_)[t].name;  // a repeated name keeps its first tensor
      by_name->insert_unique(maploc::detail::hash_text(name), static_cast<std::uint32_t>(t),
                             [&](std::uint32_t k) { return (*out.tensors_)[k].name == name; });
    }
    out.by_name_ = std::move(by_name);

    const bool any_cuda = std::any_of(plan.targets.begin(), plan.targets.end(),
                                      [](const Device& d) { return d.kind == Device::Kind::kCuda; });
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
    Arenas arenas;
    if (any_cuda && options.cuda.arena) arenas = make_arenas(checkpoint, plan, inventory);
    std::optional<Bytes> cow;
    if (options.writable && options.host == HostMemory::kMappedView && !checkpoint.remote_transfer()) {
      cow = copy_on_write_mapping(checkpoint);
    }
    // A URL source: copies and uploads stream their storages straight to their destination; the
    // rest (views of the object, deflated records) are fetched now, several requests in flight.
    std::vector<bool> stream_wanted(storages.size(), false);
    for (std::size_t i = 0; i < storages.size(); ++i) {
      stream_wanted[i] = plan.targets[i].kind == Device::Kind::kCuda ||
                         (plan.targets[i].kind == Device::Kind::kCpu && host_copies(checkpoint, i, options, cow));
    }
    const detail::RemoteReads streams = detail::remote_reads(checkpoint, stream_wanted);
    std::vector<std::size_t> fetch_now;
    for (std::size_t i : streams.others) {
      if (plan.targets[i].kind != Device::Kind::kMeta) fetch_now.push_back(i);
    }
    checkpoint.prefetch(fetch_now);

    // Private copies on the host share one mapping in huge pages (host_memory.h, HostArena);
    // pinned copies share one page-locked allocation (one cudaHostAlloc, not one per storage).
    detail::HostArena arena;
    if (options.host == HostMemory::kOwnedCopy || options.host == HostMemory::kPinned) {
      std::uint64_t total = 0;
      for (std::size_t i = 0; i < storages.size(); ++i) {
        if (plan.targets[i].kind == Device::Kind::kCpu) total += detail::host_arena_slice(storages[i].nbytes);
      }
      arena = options.host == HostMemory::kPinned
                  ? detail::pinned_arena(inventory.backend, total, "the pinned copies of " + checkpoint.path())
                  : detail::host_arena(total, "the private copies of " + checkpoint.path());
    }
    std::vector<detail::UploadJob> jobs;
    std::vector<detail::HostFill> fills;
    for (std::size_t i = 0; i < storages.size(); ++i) {
      const torch::Storage& s = storages[i];
      const Device& target = plan.targets[i];
      PlacedStorage& placed = out.storages_[i];
      switch (target.kind) {
        case Device::Kind::kMeta:
          placed.device = target;
          placed.nbytes = s.nbytes;
          break;
        case Device::Kind::kCpu:
          placed = place_on_host(checkpoint, i, options, cow, names, fills, arena, streams.readers[i]);
          break;
        case Device::Kind::kCuda: {
          // Built only here: a mapped view never names its storage, and W1 has 30,000 of them.
          const std::string who = detail::describe_storage(s, names(i));
          placed.device = target;
          placed.nbytes = s.nbytes;
          placed.writable = true;
          const auto d = static_cast<std::size_t>(target.index);
          if (options.cuda.arena) {
            placed.data = arenas.bases[d] + arenas.offsets[i];
            placed.owner = arenas.owners[d];
          } else {
            placed.owner = detail::device_allocate(inventory.backend, target.index, s.nbytes, &placed.data, who);
          }
          if (streams.readers[i]) {
            jobs.push_back({Bytes(), -1, swap_unit_for(checkpoint, s), placed.data, target.index, who, streams.readers[i],
                            s.nbytes});
            break;
          }
          const Bytes raw = checkpoint.storage_bytes(i);
          const std::int64_t at = file_offset_of(checkpoint, s, raw);
          jobs.push_back({raw, at, swap_unit_for(checkpoint, s), placed.data, target.index, who});
          break;
        }
      }
    }
    std::uint64_t to_copy = 0;
    for (const auto& f : fills) to_copy += f.size();
    for (const auto& j : jobs) to_copy += j.size();
    maploc::detail::ProgressMeter meter(options.progress, to_copy);
    if (!fills.empty()) {
      const FileForReads file(checkpoint, fills);
      detail::fill_host(fills, file.fd(), std::max(host_threads_of(options), streams.parallel), &meter);
    }
    if (options.populate && options.host == HostMemory::kMappedView) {
      detail::populate_host(out.storages_, host_threads_of(options),
                            [&](std::size_t i) { return detail::describe_storage(storages[i], names(i)); });
    }
    if (!jobs.empty()) {
      const FileForReads file(checkpoint, jobs);
      CudaOptions cuda = options.cuda;  // a URL source: as many readers as requests to keep in flight
      cuda.reader_threads = std::max(cuda.reader_threads, streams.parallel);
      detail::upload(*inventory.backend, jobs, file.fd(), cuda,
                     options.cuda.arena ? detail::Destinations::kOwnArena : detail::Destinations::kSeparate, &meter);
    }
    return out;
  });
}

}  // namespace maploc::remap
