// hash.h - a tensor's values as torch's tensor.contiguous() bytes, and their SHA-256.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "maploc/bytes.h"
#include "maploc/limits.h"
#include "maploc/torch/checkpoint.h"
#include "maploc/torch/tensor.h"

namespace maploc::torch {

/// Walks a strided tensor over its storage bytes in row-major order and
/// hands out its values as little-endian bytes, in chunks: what
/// tensor.contiguous() holds on a little-endian host. Big-endian storages
/// are byte-swapped by swap_unit(dtype). conj/neg metadata is not applied
/// (the stored values are returned, as torch's manifests hash them).
/// Preconditions: tensor was validated against a storage of raw_bytes
/// (Checkpoint guarantees it). Raises kInvalidArgument for a tensor without
/// a storage, and kTorchLimitExpandedBytes, before the first chunk, for an
/// expanded view (more values than the storage elements it reaches: stride 0,
/// overlapping strides) whose values exceed max_expanded_bytes
/// (Limits::torch_max_expanded_bytes).
void for_each_value_chunk(const Tensor& tensor, const Bytes& raw_bytes, ByteOrder order,
                          const std::function<void(std::span<const std::uint8_t>)>& sink,
                          std::uint64_t max_expanded_bytes = Limits{}.torch_max_expanded_bytes);

/// All values of a tensor as one little-endian row-major buffer. An expanded
/// view is bounded by the checkpoint's Limits::torch_max_expanded_bytes.
std::vector<std::uint8_t> contiguous_bytes(const Checkpoint& checkpoint, const Tensor& tensor);

/// Lower-case hex SHA-256 of contiguous_bytes(), streamed without building
/// the buffer: the `sha256` of the fixture manifests. Bounded as contiguous_bytes.
std::string tensor_sha256(const Checkpoint& checkpoint, const Tensor& tensor);

}  // namespace maploc::torch
