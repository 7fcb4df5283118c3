// safetensors.h - the safetensors format: dtype names, and writing a checkpoint's tensors as one.
#pragma once

#include <cstdint>
#include <functional>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "maploc/progress.h"
#include "maploc/torch/checkpoint.h"
#include "maploc/bytes.h"

namespace maploc::torch {

/// Largest header a safetensors file may declare (the format's own cap, 100 MB).
inline constexpr std::uint64_t kSafetensorsMaxHeader = 100'000'000;

/// Metadata key prefix recording a tied tensor: "maploc.tied.<name>" -> "<name written>".
inline constexpr std::string_view kTiedPrefix = "maploc.tied.";

/// Metadata key prefix recording a wrapper subclass (no bytes of its own; its inner tensors are written
/// under their names): "maploc.wrapper_subclass.<name>" -> {"subclass", "dtype", "shape", "attributes"} as JSON.
inline constexpr std::string_view kWrapperSubclassPrefix = "maploc.wrapper_subclass.";

/// Metadata key prefix recording a jagged nested tensor (its values, offsets and lengths are written as
/// tensors under their names): "maploc.nested_jagged.<name>" -> {"dtype", "requires_grad",
/// "components": {role: tensor name}, "attributes": {"ragged_idx", "min_seqlen", "max_seqlen"}} as JSON.
inline constexpr std::string_view kNestedJaggedPrefix = "maploc.nested_jagged.";

/// The safetensors dtype string of a dtype ("F32", "BF16", "F8_E4M3", "C64"),
/// nullopt for dtypes the format cannot hold (complex128, quantized, bits, ...).
std::optional<std::string_view> safetensors_dtype(DType dtype) noexcept;

/// The dtype of a safetensors dtype string, nullopt when maploc does not know it.
std::optional<DType> dtype_from_safetensors(std::string_view name) noexcept;

/// How to write a safetensors file.
struct SafetensorsOptions {
  /// false (default): a tensor that is exactly another one (same storage,
  /// offset, shape, stride, dtype: tied weights) is written once and
  /// recorded in `__metadata__` as "maploc.tied.<name>": "<kept name>";
  /// true: every tensor gets its own copy of the bytes.
  bool duplicate_tied = false;
  /// Told how many tensor bytes are written (see maploc::Progress).
  Progress progress{};
  /// Extra `__metadata__` entries (written after maploc's own).
  std::vector<std::pair<std::string, std::string>> metadata;
  /// When set, only the tensors (indices into Checkpoint::tensors()) it accepts are written (one shard of a set).
  std::function<bool(std::size_t tensor)> include;
};

/// What was written.
struct SafetensorsReport {
  std::size_t tensors = 0;       ///< tensors with bytes of their own
  std::uint64_t data_bytes = 0;
  std::vector<std::pair<std::string, std::string>> tied;  ///< (name, kept name)
  std::vector<std::size_t> written;  ///< indices into tensors() of the tensors in the header, in tensors() order
};

/// Writes the dense tensors of `checkpoint` as safetensors: an 8-byte
/// little-endian header size, a JSON header (dtype, shape, data_offsets per
/// tensor; `__metadata__` with "format": "pt" and the source), padded with
/// spaces to a multiple of 8, then every tensor's values contiguous and
/// little-endian (views are made contiguous, big-endian files swapped).
/// Tensors are ordered by element size, largest first, so each one starts
/// aligned to its element size. Raises kTorchNotConvertible for a tensor
/// safetensors cannot hold (sparse, quantized, nested, meta, conj/neg bit,
/// an unsupported dtype), naming it; sink errors.
SafetensorsReport write_safetensors(const Checkpoint& checkpoint, const ByteSink& sink,
                                    const SafetensorsOptions& options = {});

/// write_safetensors() into `out` through an AtomicFile (all or nothing).
SafetensorsReport save_safetensors(const Checkpoint& checkpoint, const std::filesystem::path& out,
                                   const SafetensorsOptions& options = {});

}  // namespace maploc::torch
