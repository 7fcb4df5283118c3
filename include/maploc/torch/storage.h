// storage.h - one storage of a checkpoint: the bytes one or more tensors view.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "maploc/torch/dtype.h"

namespace maploc::torch {

/// A storage as its persistent id describes it ('storage', type, key,
/// location, numel), with where its bytes lie. One Storage per key: every
/// tensor that references the key shares it (pytorch-format.md §4.2).
struct Storage {
  std::string key;        ///< the key string from the persistent id ("0", "94919395964320"), never parsed
  DType dtype = DType::kUInt8; ///< from the storage class; uint8 for torch.storage.UntypedStorage
  std::uint64_t numel = 0;///< elements of dtype, as the persistent id says
  std::uint64_t nbytes = 0;///< numel x element_size(dtype), checked against the bytes on disk
  std::string location;   ///< the location tag verbatim: "cpu", "cuda:1", "mps", "meta", ...
  std::string record;     ///< zip record name ("archive/data/0"); for legacy and tar streams "storages/<key>"
  std::uint64_t file_offset = 0; ///< offset of the first data byte in the file (of the compressed data for a deflated record)
  bool compressed = false;///< the bytes are in a deflated zip record, so file_offset is not the raw bytes
  /// A slice of another storage (legacy view_metadata, tar storage views):
  /// the index of the root in Checkpoint::storages(); key is the view's own key.
  std::optional<std::size_t> view_of;
  std::uint64_t view_offset = 0; ///< start of the slice in the root, in elements of dtype
};

}  // namespace maploc::torch
