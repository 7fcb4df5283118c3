// slice.h - which part of each tensor one rank of a world owns: rows, columns, whole tensors by name, or all.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <optional>
#include <vector>

namespace maploc::remap {

/// How a tensor is divided between the ranks (docs/sharded.md, "Rank slicing").
enum class SliceKind : unsigned char {
  kRows,       ///< dim 0 split in world_size parts (tensor parallel, column-parallel linear weights)
  kColumns,    ///< dim 1 split in world_size parts (row-parallel linear weights); read strided
  kStage,      ///< the whole tensor on one rank only (pipeline stages)
  kReplicate,  ///< the whole tensor on every rank
};

/// One rule: tensors whose name matches `pattern` (a glob: `*` any run, `?` one character) are divided by `kind`.
struct SliceRule {
  SliceKind kind = SliceKind::kReplicate;
  std::string pattern;
  int stage = 0;  ///< kStage: the rank that holds the tensor
};

/// The rules, first match wins; a tensor no rule matches is replicated.
struct SliceSpec {
  std::vector<SliceRule> rules;

  /// Parses "KIND:GLOB[,KIND:GLOB...]" with KIND one of rows, cols, all, stageN
  /// (e.g. "rows:*.q_proj.weight,cols:*.o_proj.weight,stage0:layers.0.*,stage1:layers.1.*").
  /// Raises kInvalidArgument naming the bad rule.
  static SliceSpec parse(std::string_view text);
};

/// One process of a world: its rank, the world size and the rules.
struct RankSlice {
  int rank = 0;
  int world_size = 1;
  SliceSpec spec;

  /// rank and world_size from the launcher's environment (RANK, WORLD_SIZE as torchrun,
  /// torch.distributed and most MPI wrappers set them; OMPI_COMM_WORLD_RANK/SIZE and
  /// PMI_RANK/PMI_SIZE as fallbacks). Raises kInvalidArgument when none is set or values are bad.
  static RankSlice from_environment(SliceSpec spec);
};

/// The rows (or columns) [begin, end) of a dimension of `size` that `rank` of
/// `world_size` owns: torch.chunk's split, as DTensor's Shard(dim) places
/// them (ceil(size / world_size) per rank, the last ranks shorter or empty).
std::pair<std::int64_t, std::int64_t> slice_bounds(std::int64_t size, int rank, int world_size) noexcept;

}  // namespace maploc::remap
