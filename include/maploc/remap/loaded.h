// loaded.h - a checkpoint whose storages have been placed on the CPU or CUDA devices.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "maploc/limits.h"
#include "maploc/progress.h"
#include "maploc/remap/device.h"
#include "maploc/remap/map_location.h"
#include "maploc/remap/slice.h"
#include "maploc/torch/checkpoint.h"

namespace maploc::detail {
class FlatIndex;
}  // namespace maploc::detail

namespace maploc::remap {

/// How storages placed on the CPU are held.
enum class HostMemory : std::uint8_t {
  kMappedView,  ///< zero-copy views of the read-only file mapping (default); copies only where the
                ///< bytes must change (big-endian files, deflated records)
  kOwnedCopy,   ///< private, 64-byte-aligned, writable copies (one load's copies share one huge-page mapping, freed with the last of them)
  kPinned,      ///< page-locked copies (cudaMallocHost); needs a build with CUDA
};

/// Tuning of the CUDA upload pipeline (ignored for CPU placements); docs/cuda.md
/// says how the defaults were chosen. The staging ring is made once per
/// device runtime and reused by every later load, to() and load_into with the
/// same geometry.
/// The caller's CUDA stream on one device (a cudaStream_t, e.g. torch.cuda.current_stream(d).cuda_stream).
struct CallerStream {
  int device = 0;
  void* stream = nullptr;  ///< null: the legacy default stream
};

struct CudaOptions {
  /// Stream contract (docs/cuda.md): every copy maploc makes into or out of device memory starts
  /// after the work queued, when the call is made, on the caller's stream of that device: the one
  /// named here, or the legacy default stream (stream 0) for devices not named. maploc's calls
  /// return only after their copies completed, so later work on any stream sees the bytes.
  std::vector<CallerStream> streams;
  std::uint64_t staging_bytes = std::uint64_t{16} << 20;  ///< size of one pinned staging buffer
  /// 8 readers and 8 buffers (128 MiB pinned): on an H200 from a warm page cache, 88% of pinned
  /// host-to-device bandwidth, where 4 and 4 reached 59% (docs/cuda.md, "The GPU run").
  unsigned staging_buffers = 8;                            ///< buffers in the ring
  unsigned reader_threads = 8;                             ///< threads filling the ring, alive for the load
  /// One allocation per device holding its storages at 256-byte-aligned
  /// offsets, neighbours sent in one transfer (default); false: one
  /// allocation per storage, each freed with its last holder.
  bool arena = true;
};

/// What a rank-sliced load read (LoadOptions::slice_report).
struct SliceReport {
  /// bytes placed from plain file ranges or URL streams: exactly this rank's slices and whole tensors
  std::uint64_t bytes_from_files = 0;
  std::uint64_t bytes_from_memory = 0;  ///< whole storages taken from storage_bytes() (deflated, DCP), once each
  std::size_t tensors_sliced = 0;       ///< split by rows or columns
  std::size_t tensors_whole = 0;        ///< replicated, or this rank's pipeline stage
  std::size_t tensors_skipped = 0;      ///< another rank's stage
};

/// Everything load() needs besides the checkpoint.
struct LoadOptions {
  MapLocation map;                        ///< where storages go (default: their saved tags)
  /// Refuse (kTorchIncomplete) a checkpoint with unreferenced storages or unknown rebuild
  /// functions (Checkpoint::unreferenced_storages, unknown_rebuilds): for a checkpoint opened
  /// without torch::Options::strict, to list it first and load it only when complete.
  bool strict = false;
  HostMemory host = HostMemory::kMappedView;
  /// With kMappedView: hand out writable copy-on-write pages instead of read-only ones.
  bool writable = false;
  /// With kMappedView: map every page before load() returns (madvise POPULATE_READ), so that
  /// first use never faults; the pages stay shared with the page cache until written.
  /// Uses host_threads. Ignored for other HostMemory kinds (their copies are resident already).
  bool populate = false;
  CudaOptions cuda;
  /// Threads filling owned and pinned host copies, or populating views (0: one per
  /// core, at most 8). Loads under 16 MiB of copies (or pages) stay on the calling thread.
  unsigned host_threads = 0;
  /// Told how many of the bytes to copy (host copies and device uploads; views
  /// copy nothing) are done; see maploc::Progress.
  Progress progress{};
  /// The devices to plan against; nullptr probes this process (DeviceInventory::probe()).
  const DeviceInventory* inventory = nullptr;
  /// Rank slicing (docs/sharded.md): place only the rows, columns or tensors this rank owns,
  /// reading only their bytes, in the same pipeline as a whole load (every option here applies):
  /// whole tensors are placed as without a slice; rows and columns get copies of their own (host
  /// copies in the arena of owned or pinned copies, device copies in the device arena).
  std::optional<RankSlice> slice;
  /// With `slice`: filled with what was read.
  SliceReport* slice_report = nullptr;
};

/// One placed storage: `nbytes` bytes at `data` on `device`, in native
/// (little-endian) byte order. `data` is a device pointer for CUDA, null for meta.
struct PlacedStorage {
  Device device;
  void* data = nullptr;
  std::uint64_t nbytes = 0;
  bool writable = false;
  bool pinned = false;          ///< page-locked host memory (HostMemory::kPinned): DLPack's kDLCUDAHost
  std::shared_ptr<void> owner;  ///< frees the memory (or unmaps the pages) when the last holder goes
};

/// A caller-owned buffer to fill with one tensor (`load_into`).
struct Destination {
  std::string name;       ///< tensor name in the checkpoint
  Device device;          ///< where `data` lives
  void* data = nullptr;   ///< numel x element size bytes, row-major contiguous
  torch::DType dtype = torch::DType::kFloat32;
  std::vector<std::int64_t> shape;
};

/// What load_into did: torch's load_state_dict report.
struct LoadIntoReport {
  std::vector<std::string> loaded;
  std::vector<std::string> missing;     ///< destinations with no tensor of that name
  std::vector<std::string> unexpected;  ///< checkpoint tensors no destination asked for
};

/// The result of load(): the checkpoint's tensors over placed storages.
/// Tensors keep the checkpoint's geometry (shape, stride, storage_offset);
/// tensors that shared a storage still share one placed storage.
class Loaded {
 public:
  /// The checkpoint's tensors (same order and indices as Checkpoint::tensors()).
  const std::vector<torch::Tensor>& tensors() const noexcept { return *tensors_; }
  /// One entry per checkpoint storage, same indices.
  const std::vector<PlacedStorage>& storages() const noexcept { return storages_; }
  /// Device of tensor i (cpu for storage-less tensors with no device).
  Device device_of(std::size_t tensor) const;
  /// Index of the tensor with this name, or nullopt.
  std::optional<std::size_t> find(std::string_view name) const;

  /// Moves the storages of every tensor whose name matches `name_glob` to
  /// `device`. A storage moves once and every tensor viewing it follows, so
  /// shared storages stay shared. Raises kRemap* for a device that cannot be used.
  void to(const Device& device, std::string_view name_glob = "*");
  /// to(cpu) for everything.
  void cpu() { to(Device::cpu()); }

  /// A host copy of storage i (copied back from the device when it lives there).
  std::vector<std::uint8_t> host_bytes(std::size_t storage) const;
  /// SHA-256 of tensor i's values in row-major order, computed from the
  /// placed copy: equal to the fixture manifests' `sha256`.
  std::string tensor_sha256(std::size_t tensor) const;

  /// Copies tensors into caller-owned buffers by name, with load_state_dict's
  /// rules: with `strict`, any missing or unexpected name raises
  /// kRemapStateDictMismatch listing them; a dtype or shape mismatch always
  /// raises it, naming the tensor.
  LoadIntoReport load_into(std::span<const Destination> destinations, bool strict = true) const;

  /// The CUDA options to(), cpu(), host_bytes(), tensor_sha256() and load_into use: those of
  /// the load, until changed here (for instance to order them after another caller stream).
  const CudaOptions& cuda_options() const noexcept { return cuda_; }
  void set_cuda_options(CudaOptions options) { cuda_ = std::move(options); }

 private:
  friend Loaded load(const torch::Checkpoint&, const LoadOptions&);
  std::shared_ptr<const std::vector<torch::Tensor>> tensors_ =
      std::make_shared<const std::vector<torch::Tensor>>();  ///< the checkpoint's, shared
  std::vector<PlacedStorage> storages_;
  std::shared_ptr<const maploc::detail::FlatIndex> by_name_;  ///< tensor names, hashed
  DeviceInventory inventory_;
  CudaOptions cuda_;
  /// The checkpoint's Limits::torch_max_expanded_bytes: tensor_sha256 and load_into of an
  /// expanded view (stride 0) produce at most this many bytes of values.
  std::uint64_t max_expanded_bytes_ = Limits{}.torch_max_expanded_bytes;
};

/// Plans (make_plan + check_fits), then allocates every storage on its
/// device and fills it from the file. On any failure nothing stays
/// allocated and the error names the storage. Raises kRemap* codes,
/// kRemapCudaNotBuilt for CUDA or pinned placement in a build without CUDA,
/// kRemapDevice for CUDA runtime failures and, with `populate`, for file
/// pages the kernel cannot read (file truncated under the mapping, I/O error).
Loaded load(const torch::Checkpoint& checkpoint, const LoadOptions& options = {});

}  // namespace maploc::remap
