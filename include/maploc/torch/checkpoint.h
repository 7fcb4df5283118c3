// checkpoint.h - a torch checkpoint of any generation, read into storages and tensors.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "maploc/bytes.h"
#include "maploc/limits.h"
#include "maploc/mapped_file.h"
#include "maploc/pickle/value.h"
#include "maploc/remote/object.h"
#include "maploc/torch/storage.h"
#include "maploc/torch/tensor.h"
#include "maploc/zip/archive.h"

namespace maploc::torch {

/// The container generation of a checkpoint (pytorch-format.md §0.1).
enum class Format : std::uint8_t {
  kZip,          ///< torch.save >= 1.6: prefix/data.pkl + prefix/data/<key>
  kLegacy,       ///< the magic-number pickle stream (0.4-1.5, _use_new_zipfile_serialization=False)
  kTar,          ///< torch 0.1.x: a tar of 'storages', 'tensors' and 'pickle'
  kTorchScript,  ///< torch.jit.save: data.pkl + constants.pkl (code/ is never run)
  kSafetensors,  ///< a .safetensors file: one storage per tensor, all tagged cpu (docs/write.md)
  kSet,          ///< several files read as one: an index's weight_map, or a list of files (docs/sharded.md)
  kDcp,          ///< a torch.distributed.checkpoint directory: .metadata + *.distcp (docs/sharded.md)
};

/// "zip", "legacy", "tar", "torchscript", "safetensors", "set", "dcp".
std::string_view format_name(Format format) noexcept;

/// Byte order of the storage bytes on disk.
enum class ByteOrder : std::uint8_t { kLittle, kBig };

/// "little" or "big".
std::string_view byteorder_name(ByteOrder order) noexcept;

/// Receives non-fatal oddities (an unknown byteorder value, a storage that
/// is never referenced, ...). Never called for errors, which throw.
using Diagnostics = std::function<void(std::string_view message)>;

/// The tensor an object of the tree became (Checkpoint::object_tensors): a rebuild call node of
/// root() (or constants_root()) by its identity (pickle::Value::identity()), or a Value::external
/// handle (a bare storage, a tar tensor) by its value, with `node` null.
struct ObjectTensor {
  const void* node = nullptr;
  std::uint64_t handle = 0;
  std::size_t tensor = 0;  ///< index into Checkpoint::tensors(): the tensor named on the first path to it
};

/// How to open a checkpoint.
struct Options {
  Limits limits{};
  Diagnostics diagnostics{};
  /// Byte order assumed by zip archives without a `byteorder` record. torch
  /// >= 2.2 assumes little on every host; set kBig for big-endian files
  /// saved with the record disabled.
  ByteOrder default_byteorder = ByteOrder::kLittle;
  /// Completeness (docs/torch.md, "Nothing silently dropped"): a storage that no named tensor
  /// reaches, or a call of a `_rebuild*` function maploc does not know, is always reported
  /// (Checkpoint::unreferenced_storages, unknown_rebuilds, and a diagnostic naming it); strict
  /// makes either an error, kTorchIncomplete. The CLI's --strict.
  bool strict = false;
  /// How a URL source (http://, https://, s3://) is read: requests in flight, retries (docs/remote.md).
  remote::Options remote{};
};

/// One file of a kSet checkpoint: where its storages and tensors lie in the set's lists.
struct SetMember {
  std::string path;             ///< the file as opened (index directory joined with the weight_map name)
  Format format = Format::kZip; ///< the file's own format
  std::size_t first_storage = 0, storage_count = 0;  ///< range in Checkpoint::storages()
  std::size_t first_tensor = 0, tensor_count = 0;    ///< range in Checkpoint::tensors()
  std::uint64_t file_bytes = 0; ///< size of the file
};

/// A file by URL (http, https, s3) with what Checkpoint::open reads of it fetched: for a zip, its
/// end records, central directory, local headers and every record outside data/ and constants/
/// (data.pkl among them); for safetensors, the header; anything else whole (docs/remote.md). Other
/// bytes are fetched by MappedFile::ensure. For tools that read records themselves (maploc dis).
/// Raises the kRemote* codes.
MappedFile open_url(const std::string& url, const Options& options);

/// Where a storage's bytes lie in an object read by URL (Checkpoint::remote_range).
struct RemoteRange {
  std::shared_ptr<const RangeSource> source;
  std::uint64_t offset = 0;  ///< of the storage's first byte in the object
  std::uint64_t length = 0;  ///< the storage's bytes
};

/// Where a storage's bytes lie in a file on disk, unchanged (stored, not deflated or assembled).
struct FileRange {
  std::string path;         ///< the file to read
  std::uint64_t offset = 0; ///< of the storage's first byte
};

/// A kDcp BYTE_IO item: torch.save bytes of a non-tensor value, listed, never unpickled.
struct ByteItem {
  std::string name;             ///< the state_dict key ("step", "optimizer.param_groups")
  std::string file;             ///< the .distcp file holding it
  std::uint64_t offset = 0, length = 0;  ///< its byte range in that file
  std::string transform;        ///< first transform descriptor ("stream.zstd/1"), empty for none
};

/// An opened checkpoint: its storages and tensors, validated, plus the
/// pickle tree for callers that want the rest of the object.
///
/// Lifetime: the Checkpoint owns the file mapping and the pickle trees;
/// Bytes returned by storage_bytes() keep the mapping alive on their own.
/// Move-only.
class Checkpoint {
 public:
  /// Opens path and detects its format by content, never by name. A
  /// directory holding one `*.index.json`, or a JSON index file itself
  /// (`{"metadata": ..., "weight_map": {tensor: file}}`), opens the set it
  /// describes as one kSet checkpoint (open_set's rules; docs/sharded.md).
  /// A directory holding `.metadata` opens as kDcp: the metadata pickle is
  /// run by the inert machine (its globals checked against DCP's own
  /// classes), one cpu storage and contiguous tensor per tensor entry,
  /// assembled from its chunks by storage_bytes(); kTorchBadDcp for metadata
  /// or chunks that do not fit together.
  /// Raises kIoOpen/kIoRead, any kZip*/kPickle* code from the layers below,
  /// and kTorchNotCheckpoint (the message says what the file looks like:
  /// HTML page, git-lfs pointer, empty, safetensors, numpy, ...),
  /// kTorchPreviewFormat, kTorchUnsupportedFormat, kTorchBadLegacy,
  /// kTorchBadTar, kTorchBadPersistentId, kTorchUnknownDType,
  /// kTorchStorageMissing, kTorchRecordSize, kTorchBadTensor,
  /// kTorchTensorOutOfBounds, kTorchStorageConflict.
  /// A URL (http://, https://, s3://; remote::is_url) is read by ranged requests: opening a zip
  /// checkpoint fetches its end records, central directory, local headers and pickles, not its
  /// storages (docs/remote.md); kRemote* codes for the transfer.
  static Checkpoint open(const std::filesystem::path& path, const Options& options = {});
  /// The same for bytes already in memory.
  static Checkpoint from_file(MappedFile file, const Options& options = {});
  /// Opens several files as one kSet checkpoint: storages and tensors of each
  /// file in turn, each file opened (mapped) once. A tensor name found in two
  /// files raises kTorchBadSet. Raises what open() raises for each file.
  static Checkpoint open_set(const std::vector<std::filesystem::path>& files, const Options& options = {});

  Checkpoint(Checkpoint&&) noexcept;
  Checkpoint& operator=(Checkpoint&&) noexcept;
  ~Checkpoint();

  /// The file name given to open() (for messages).
  const std::string& path() const noexcept;
  Format format() const noexcept;
  /// Byte order of the storage bytes: the `byteorder` record, else
  /// Options::default_byteorder for zip; always little for legacy and tar.
  ByteOrder byteorder() const noexcept;
  /// True when a zip archive carries a `byteorder` record.
  bool has_byteorder_record() const noexcept;
  /// PROTO of the main object pickle (0 when it has none).
  int pickle_protocol() const noexcept;

  /// Storages in order of first reference.
  const std::vector<Storage>& storages() const noexcept;
  /// Tensors in the order a depth-first walk of the object names them
  /// (dict insertion order, list order, attribute order). Components of
  /// composites come right after their composite.
  const std::vector<Tensor>& tensors() const noexcept;
  /// The same tensors, kept alive by the pointer after the Checkpoint is gone
  /// (remap::Loaded holds them this way instead of copying them).
  std::shared_ptr<const std::vector<Tensor>> shared_tensors() const noexcept;
  /// "module.name" of every GLOBAL not on torch's default weights_only
  /// allowlist (what torch.serialization.get_unsafe_globals_in_checkpoint
  /// answers), sorted and without duplicates, from every pickle torch would
  /// unpickle: all five of a legacy stream, and constants.pkl as well as
  /// data.pkl of a TorchScript archive.
  const std::vector<std::string>& unknown_globals() const noexcept;
  /// What the records or stream say about the writer, e.g. "version record 3",
  /// "byteorder record (torch >= 2.1)", ".format_version 1 (torch >= 2.7)".
  const std::vector<std::string>& version_hints() const noexcept;
  /// Indices into storages() that no tensor of tensors() reaches (a view's root counts as
  /// reached through the view): storages torch.load would return inside an object maploc does
  /// not walk. Empty for every file torch's own writers make of tensors maploc knows. For a kSet,
  /// each member file was checked as it opened.
  const std::vector<std::size_t>& unreferenced_storages() const noexcept;
  /// "module.name" of each call of a `_rebuild*` function maploc does not know, in file order, once each.
  const std::vector<std::string>& unknown_rebuilds() const noexcept;
  /// The Limits the checkpoint was opened with (Options::limits); tensor_sha256 and
  /// contiguous_bytes bound expanded views by its torch_max_expanded_bytes.
  const Limits& limits() const noexcept;

  /// The main object (data.pkl, or the legacy/tar object pickle). Storages
  /// appear in it as Value::external(h) handles; storage_of_handle(h)
  /// resolves them. Lives as long as the Checkpoint.
  const pickle::Value& root() const noexcept;
  /// TorchScript only: the constants.pkl tuple (None otherwise).
  const pickle::Value& constants_root() const noexcept;
  /// The zip archive of kZip and kTorchScript checkpoints, nullptr for the
  /// other formats. Lives as long as the Checkpoint.
  const zip::Archive* archive() const noexcept;

  /// Where the main object pickle lies, for tools that re-read or rewrite it.
  struct PickleSpan {
    Bytes stream;              ///< the bytes holding it (data.pkl, or the whole legacy stream)
    std::uint64_t start = 0;   ///< offset of its first opcode in `stream`
    std::string name;          ///< for messages ("archive/data.pkl", the file)
  };
  /// The object pickle of kZip, kTorchScript (data.pkl) and kLegacy (the
  /// fourth pickle of the stream) checkpoints. Raises kInvalidArgument for
  /// kTar and kSafetensors, which have no single object pickle to rewrite.
  PickleSpan object_pickle() const;

  /// For kSafetensors: the header's `__metadata__` (string to string), in
  /// file order; for a kSet opened from an index: the index's "metadata"
  /// members (numbers as their literal text, e.g. total_size, which is
  /// reported and never trusted); empty for the other formats.
  const std::vector<std::pair<std::string, std::string>>& metadata() const noexcept;

  /// For kDcp: the BYTE_IO items (empty for the other formats).
  const std::vector<ByteItem>& byte_items() const noexcept;
  /// For kSet: the files in set order (empty for the other formats).
  const std::vector<SetMember>& members() const noexcept;
  /// For kSet: the member holding storage `storage_index` (index into members()).
  std::size_t member_of_storage(std::size_t storage_index) const;

  /// The node of root() (or constants_root()) that rebuilds tensors()[i]: the outermost rebuild
  /// call (`_rebuild_from_type_v2`, `_rebuild_parameter`, `_rebuild_tensor_v2`, ...), with its
  /// state and inner tensors, storages as Value::external handles. nullptr for tensors no pickle
  /// node rebuilds (components, storage objects, safetensors, DCP, tar tensors, set members).
  /// Writers re-emit it to keep what a tensor is beyond its bytes (write.cpp's sharded layout).
  const pickle::Value* tensor_node(std::size_t i) const noexcept;
  /// Every tensor-making object of root() and constants_root() the walk reached, with the tensor it
  /// became, one entry per path (a tied weight appears once per name; the first is the first path),
  /// in walk order. Lets a caller rebuild the object tree with its tensors (the C API's
  /// maploc_checkpoint_object). Empty for kSafetensors, kSet and kDcp, which have no object tree.
  const std::vector<ObjectTensor>& object_tensors() const noexcept;

  /// The storage index a Value::external handle of root() refers to.
  std::optional<std::size_t> storage_of_handle(std::uint64_t handle) const noexcept;

  /// The raw bytes of a storage exactly as on disk (not byte-swapped): a
  /// zero-copy view of the mapping for stored records and streams, an
  /// inflated buffer for deflated records, the assembled tensor for kDcp
  /// (each call assembles it anew; a chunk with a transform raises
  /// kTorchUnsupportedFormat naming it). Size is storage.nbytes.
  /// Precondition: `storage` is one of storages(). Raises kZip* on inflate failure.
  Bytes storage_bytes(const Storage& storage) const;
  /// The same by index into storages() (kInvalidArgument when out of range).
  Bytes storage_bytes(std::size_t storage_index) const;
  /// Where storage_bytes(i) lies in a file on disk (a set member's file for
  /// kSet), for readers that read part of a storage with pread; nullopt for
  /// deflated records, DCP tensors, and checkpoints opened from memory.
  std::optional<FileRange> storage_file_range(std::size_t storage_index) const;
  /// storage_file_range(i)'s offset when that file is path() itself, without making the path (a
  /// loader asks it of every storage); nullopt where storage_file_range is, and for a set's members
  /// (their files are not the index's) and out-of-range indices.
  std::optional<std::uint64_t> storage_file_offset(std::size_t storage_index) const;

  /// For a checkpoint opened from a URL: what reading it has cost so far; nullopt for files.
  std::optional<RemoteTransfer> remote_transfer() const;
  /// For a checkpoint opened from a URL: fetches every storage's bytes now, with several ranged
  /// requests in flight (storage_bytes() fetches the storage it is asked for on its own). A no-op
  /// for files. Raises the kRemote* codes.
  void prefetch() const;
  /// prefetch() of the storages named only (indices into storages()).
  void prefetch(std::span<const std::size_t> storage_indexes) const;
  /// For a storage of a checkpoint opened from a URL whose bytes lie unchanged in the object
  /// (a stored zip record, a safetensors tensor; not deflated, not a view, not a legacy or tar
  /// stream read in full): where, so that a loader streams them to their destination with
  /// RangeSource::read() instead of fetching them into the object's bytes. nullopt otherwise.
  std::optional<RemoteRange> remote_range(std::size_t storage_index) const;

  struct State;  ///< implementation detail

 private:
  explicit Checkpoint(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace maploc::torch
