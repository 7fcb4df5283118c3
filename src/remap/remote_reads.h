// remote_reads.h - storages of a checkpoint read by URL streamed straight to their destinations,
// never through the object's own buffer (docs/remote.md, "Streaming loads") (internal).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "maploc/torch/checkpoint.h"

namespace maploc::remap::detail {

/// Produces bytes [offset, offset + n) of one storage into `out`. Raises maploc::Error.
using StorageReader = std::function<void(std::uint64_t offset, std::uint64_t n, std::uint8_t* out)>;

/// Per storage of a checkpoint read by URL (Checkpoint::remote_range), for those `wanted`: a reader
/// that fetches what it is asked straight into the caller's memory. A storage of 1 MiB or more is
/// read by one ranged request per piece asked. Smaller ones lying near each other in the object are
/// fetched together, up to 8 MiB per request, into a buffer freed once the last of them has been
/// read out: host memory stays bounded by the requests in flight when the storages are read in
/// the object's order. Storages without a remote range (local files, deflated records, views) and
/// those not wanted get no reader. Every storage's bytes are to be read once.
struct RemoteReads {
  std::vector<StorageReader> readers;  ///< one per storage; empty where not streamed
  unsigned parallel = 0;               ///< reads to keep in flight (RangeSource::read_parallel); 0: none streamed
  std::vector<std::size_t> others;     ///< the storages without a reader, for Checkpoint::prefetch
};
RemoteReads remote_reads(const torch::Checkpoint& checkpoint, const std::vector<bool>& wanted);

}  // namespace maploc::remap::detail
