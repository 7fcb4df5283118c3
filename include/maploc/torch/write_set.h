// write_set.h - writing a checkpoint back out as a sharded set: shards of a size limit and an index.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "maploc/torch/checkpoint.h"
#include "maploc/torch/safetensors.h"
#include "maploc/torch/write.h"

namespace maploc::torch {

/// How to write a set.
struct SetWriteOptions {
  bool safetensors = true;  ///< shards as .safetensors (model-…); false: torch.save zips (pytorch_model-….bin)
  /// Largest shard, in bytes of tensor data (huggingface_hub's default: 5 GB). A tensor group
  /// larger than the limit gets a shard of its own.
  std::uint64_t max_shard_bytes = 5'000'000'000;
  ArchiveOptions archive;         ///< for torch shards (locations: the tags to write, by storage)
  SafetensorsOptions st;          ///< for safetensors shards
};

/// What save_set() wrote.
struct SetWriteReport {
  std::string index;                                   ///< the index file's path
  std::vector<std::pair<std::string, std::size_t>> files;  ///< shard file names and their tensor counts
  std::uint64_t data_bytes = 0;                        ///< tensor bytes written (the index's total_size)
  std::vector<std::pair<std::string, std::string>> tied;   ///< safetensors: (name, kept name) written once
};

/// Writes the dense tensors of `checkpoint` into directory `dir` (created if
/// absent) as shards of at most `max_shard_bytes` plus an index
/// (`model.safetensors.index.json` or `pytorch_model.bin.index.json`:
/// `{"metadata": {"total_size"}, "weight_map"}`, keys sorted), split as
/// huggingface_hub does: tensors in checkpoint order, tensors that share a
/// storage kept in one shard, a new shard when the next group would pass the
/// limit. Every shard through an AtomicFile. Raises what the shard writers
/// raise (kTorchNotConvertible, kIo*).
SetWriteReport save_set(const Checkpoint& checkpoint, const std::filesystem::path& dir,
                        const SetWriteOptions& options = {});

}  // namespace maploc::torch
