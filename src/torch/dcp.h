// dcp.h - a torch.distributed.checkpoint directory: its .metadata read inertly, chunks located (internal).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "maploc/bytes.h"
#include "maploc/mapped_file.h"
#include "maploc/torch/checkpoint.h"

namespace maploc::torch {

/// One saved chunk of a tensor: where it lies in the full tensor and in which file.
struct DcpChunk {
  std::vector<std::int64_t> offsets;  ///< ChunkStorageMetadata.offsets
  std::vector<std::int64_t> sizes;    ///< ChunkStorageMetadata.sizes
  std::uint32_t file = 0;             ///< index into DcpLayout::files
  std::uint64_t offset = 0, length = 0;  ///< _StorageInfo byte range (TORCH_SAVE layout)
  std::string transform;              ///< first transform descriptor ("stream.zstd/1"), empty for none
};

/// A SAFETENSORS-layout file of a DCP directory, opened once for all its tensors: re-parsing
/// the header and DCP_SHARDING_INFO for each tensor made a file of n tensors cost O(n^2).
struct DcpSafetensors;

/// What storage_bytes() needs to assemble each DCP tensor.
struct DcpLayout {
  std::string dir;
  std::vector<std::string> file_names;  ///< relative_path of each file, as .metadata names it
  std::vector<MappedFile> files;        ///< each mapped once
  std::vector<MappedFile> metadata_files;  ///< rank-local __R.metadata after the first (kept mapped)
  std::vector<bool> safetensors;        ///< the file is DCP's SAFETENSORS layout (tensors by fqn)
  std::vector<std::vector<DcpChunk>> chunks;  ///< per storage of the checkpoint
  std::vector<std::vector<std::int64_t>> shapes;  ///< per storage: the full tensor's size
  Limits limits;
  /// Per file, its DcpSafetensors once a tensor first needs it (storage_bytes may run on several threads).
  mutable std::mutex opened_mutex;
  mutable std::vector<std::shared_ptr<const DcpSafetensors>> opened;
};

/// The metadata of a DCP directory: `.metadata`, or, where a save ran with
/// use_collectives=False, every rank's `__R.metadata` in rank order; empty
/// when there is neither (not a DCP directory).
std::vector<std::filesystem::path> dcp_metadata_files(const std::filesystem::path& dir);

/// Reads the directory's metadata with the inert pickle machine (kTorchBadDcp
/// for a tree that is not DCP's Metadata) into `state`: one cpu storage and one
/// contiguous tensor per tensor entry, BYTE_IO items in state.byte_items.
/// Rank-local metadata files are merged: a tensor's chunks from every rank,
/// a chunk several ranks wrote taken once.
/// `metadata` is what dcp_metadata_files(dir) found (the caller has looked already).
void read_dcp(Checkpoint::State& state, const std::filesystem::path& dir,
              const std::vector<std::filesystem::path>& metadata);

/// The full tensor of storage `index`, assembled from its chunks (kTorchBadDcp
/// when chunks are missing, overlap, or disagree with the metadata).
Bytes assemble_dcp(const DcpLayout& layout, const Storage& storage, std::size_t index);

}  // namespace maploc::torch
