// parts.h - what one load places: each placed storage is segments of one checkpoint storage, the
// whole of it or the rows or columns a rank owns (internal).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "maploc/remap/loaded.h"
#include "remote_reads.h"

namespace maploc::remap::detail {

/// Bytes [src, src + len) of the checkpoint storage go to [dst, dst + len) of the placed one.
struct Segment {
  std::uint64_t src = 0, dst = 0, len = 0;
};

/// One storage a load places: segments of checkpoint storage `parent`.
struct Part {
  std::size_t parent = 0;
  std::uint64_t nbytes = 0;
  /// Ordered by dst, without gaps, adding up to nbytes; empty for a whole part, which is the one
  /// segment [0, nbytes) of its parent (no list to allocate per storage of a whole load).
  std::vector<Segment> segments;
  bool whole = false;             ///< the parent storage as it is
};

/// The tensors a load hands out, over the storages it places.
struct Parts {
  std::shared_ptr<const std::vector<torch::Tensor>> tensors;
  std::vector<Part> parts;
};

/// Every storage whole, under the checkpoint's own tensors (parts[i] is storage i).
Parts whole_parts(const torch::Checkpoint& checkpoint);

/// What rank `slice.rank` of `slice.world_size` owns (docs/sharded.md, "Rank slicing"): tensors split by
/// rows or columns get a contiguous storage of their own, made of the segments of their parent that
/// hold their slice; whole tensors (replicated, this rank's stage) share one whole part per storage;
/// other ranks' stages are left out. Counts the tensors in `report`. Raises kInvalidArgument for a rank
/// outside the world, a stage rule naming one, and a tensor its rule cannot split (not dense and
/// contiguous, too few dimensions), naming it.
Parts slice_parts(const torch::Checkpoint& checkpoint, const RankSlice& slice, SliceReport& report);

/// Bytes [offset, offset + n) of `part` into `out`, each piece read from its parent with `parent`.
void gather(const Part& part, std::uint64_t offset, std::uint64_t n, std::uint8_t* out, const StorageReader& parent);

}  // namespace maploc::remap::detail
