// write.h - a checkpoint of any readable format written back as a torch.save zip archive.
#pragma once

#include <cstdint>
#include <functional>
#include <filesystem>
#include <string>
#include <vector>

#include "maploc/progress.h"
#include "maploc/torch/checkpoint.h"
#include "maploc/bytes.h"

namespace maploc::torch {

/// How to write an archive.
struct ArchiveOptions {
  /// The location tag to write for each storage, by index into
  /// Checkpoint::storages(); an empty vector or an empty entry keeps the
  /// saved tag. Tags are written verbatim (the caller decides them).
  std::vector<std::string> locations;
  /// Record data alignment (torch: 64).
  std::uint64_t alignment = 64;
  /// The archive's top-level folder; empty: the input's for zip inputs, else "archive".
  std::string archive_name;
  /// Told how many storage bytes are written (see maploc::Progress).
  Progress progress{};
  /// When set, only the tensors (indices into Checkpoint::tensors()) it accepts are written, as
  /// a dict name -> tensor whatever the input's format (one shard of a set).
  std::function<bool(std::size_t tensor)> include;
};

/// What write_archive() did, for the CLI to tell the user.
struct ArchiveReport {
  /// "records kept, data.pkl rewritten" or "tensors as a dict name -> tensor".
  std::string layout;
  std::size_t storages = 0;       ///< storage records written
  std::uint64_t data_bytes = 0;   ///< bytes of storage data written
  std::vector<std::string> notes; ///< what changed besides the tags (byte order, views, TorchScript)
  /// The dict layout only: indices into tensors() of the tensors written as the dict's keys (a
  /// wrapper subclass's inner tensors and a composite's parts travel inside it, not as keys).
  std::vector<std::size_t> keys;
};

/// Writes `checkpoint` as a torch.save archive (pytorch-format.md §1) to
/// `sink`, streaming each storage from the input. Layout by input format:
///  * kZip: every record in the input's order, data.pkl re-emitted by
///    pickle::write with only the persistent ids' location tags changed,
///    storage records copied (byte-swapped to little-endian when the
///    input's byteorder is big), a `byteorder` record saying `little`;
///    other records (version, .format_version, extra/...) copied verbatim.
///  * kLegacy: data.pkl = the object pickle re-emitted the same way, with
///    ('module', cls, ...) ids replaced by cls as torch's loader does and
///    legacy storage views written as storages of their own; version `3`.
///  * kTorchScript, kTar, kSafetensors: a dict {tensor name: tensor} of the
///    dense tensors (_rebuild_tensor_v2, or _v3 for dtypes without a typed
///    storage), storages shared as in the input. TorchScript code and
///    non-tensor attributes are not carried over (torch.load returns a dict).
/// Raises kTorchNotConvertible (a tensor kind the dict layout cannot hold),
/// kTorchBadPersistentId, errors of the sink, zip and pickle writers.
ArchiveReport write_archive(const Checkpoint& checkpoint, const ByteSink& sink, const ArchiveOptions& options = {});

/// write_archive() into `out` through an AtomicFile: the file appears whole
/// or not at all. Raises kIoOpen/kIoWrite/kIoNoSpace besides the above.
ArchiveReport save_archive(const Checkpoint& checkpoint, const std::filesystem::path& out,
                           const ArchiveOptions& options = {});

/// Streams a storage's bytes to `sink` in chunks, byte-swapped from
/// `order` to little-endian by swap_unit(dtype).
void copy_storage_little_endian(const Bytes& bytes, DType dtype, ByteOrder order, const ByteSink& sink);

}  // namespace maploc::torch
