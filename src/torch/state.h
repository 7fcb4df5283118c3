// state.h - what an opened Checkpoint holds, shared by the format readers (internal).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "maploc/bytes.h"
#include "maploc/error.h"
#include "maploc/mapped_file.h"
#include "maploc/pickle/machine.h"
#include "maploc/torch/checkpoint.h"
#include "maploc/zip/archive.h"
#include "storage_source.h"

namespace maploc::torch {

/// What one persistent id resolved to: a storage (or a view storage), seen
/// through the dtype the id named.
struct StorageRef {
  std::size_t storage = 0;       ///< index into State::storages
  DType dtype = DType::kUInt8;   ///< dtype of the storage class the id named
};

/// One row of the origins table: the pickle object `node` (None for a Value::external handle)
/// made tensor `tensor`. Rows are appended in walk order and never change meaning; the two
/// directions the API answers (Checkpoint::tensor_node, Checkpoint::object_tensors) are derived
/// from them once, by index_origins().
struct Origin {
  pickle::Value node;        ///< the rebuild call or tensor object; None for a handle
  std::uint64_t handle = 0;  ///< the Value::external handle, where node is None
  std::size_t tensor = 0;    ///< index into State::tensors
  bool rebuilt = false;      ///< node's call rebuilt the tensor (the last such row of a tensor is its outermost call)
  bool named = false;        ///< the walk named the tensor at this object (one row per path: tied weights)
};

/// First Value::external handle that names a tar tensor rather than a StorageRef.
inline constexpr std::uint64_t kTarTensorHandle = std::uint64_t{1} << 62;

struct Checkpoint::State {
  std::string path;
  MappedFile file;
  Options options;
  Format format = Format::kZip;
  ByteOrder byteorder = ByteOrder::kLittle;
  bool has_byteorder_record = false;
  int protocol = 0;
  std::optional<zip::Archive> archive;

  std::vector<Storage> storages;
  /// Bytes actually present for each storage (record size, legacy count x
  /// element size); checked against Storage::nbytes after the walk so the
  /// error can name a tensor.
  std::vector<std::uint64_t> present_bytes;
  std::vector<StorageRef> refs;  ///< Value::external handle -> reference
  /// Tar format: tensors of the 'tensors' member by key; the object pickle
  /// refers to the i-th as Value::external(kTarTensorHandle + i).
  std::vector<Tensor> tar_tensors;                   ///< 0.1.x tar: tensors of the 'tensors' member, in file order
  std::map<std::string, std::size_t> tar_tensor_index;  ///< their keys -> index (the first of a repeated key)

  /// Shared with every remap::Loaded made from this checkpoint (no copy per load).
  std::shared_ptr<std::vector<Tensor>> tensors_owner = std::make_shared<std::vector<Tensor>>();
  std::vector<Tensor>& tensors = *tensors_owner;
  /// Which pickle object made which tensor, filled by the walk (interpret.cpp, rebuild.cpp).
  std::vector<Origin> origins;
  /// Derived from origins by index_origins(): per tensor, the row of its outermost rebuild call
  /// (Checkpoint::tensor_node; kNoOrigin where none), and the named rows (Checkpoint::object_tensors).
  std::vector<std::size_t> tensor_origin;
  std::vector<std::string> unknown_globals;
  std::vector<std::size_t> unreferenced;        ///< storages no tensor reaches (completeness.cpp)
  std::vector<std::size_t> consumed;            ///< storages read as something else (a jagged tensor's cached seqlen)
  std::vector<std::string> unknown_rebuilds;    ///< `_rebuild*` callables maploc does not know, once each
  std::vector<ObjectTensor> object_tensors;     ///< the named rows of origins, in walk order
  std::vector<std::string> hints;
  /// Safetensors `__metadata__`, in file order.
  std::vector<std::pair<std::string, std::string>> metadata;

  /// kSet: what the API reports of each member file, and which member holds each storage (the
  /// members themselves are the SetSource's).
  std::vector<SetMember> member_info;
  std::vector<std::uint32_t> storage_member;  ///< per storage: index into member_info

  /// kDcp: the BYTE_IO items (the chunks' layout is the DcpSource's).
  std::vector<ByteItem> byte_items;

  /// Where the storages' bytes lie and how they are read, set once by the format reader.
  std::unique_ptr<StorageSource> source;

  std::vector<pickle::Result> results;  ///< keeps every pickle tree alive
  pickle::Value root;
  pickle::Value constants_root;

  void diagnose(const std::string& message) const {
    if (options.diagnostics) options.diagnostics(message);
  }
};

/// Format readers: fill storages, refs, present_bytes, root (and
/// constants_root), protocol, byteorder, hints. Tensors come afterwards
/// from interpret() and validate().
/// `locate_rest` reads the local headers of every record but data.pkl and
/// constants.pkl (zip::DeferredLocate::run); read_zip runs it on another
/// thread while data.pkl runs, or first where threads do not pay.
void read_zip(Checkpoint::State& state, const std::function<void()>& locate_rest);
void read_legacy(Checkpoint::State& state);
/// True when the file's first pickle yields the legacy magic number, whatever precedes it in that
/// pickle (sniff_content only finds the number near the start; torch.load unpickles any non-zip
/// file as a legacy stream, so a payload placed before the number must not hide the stream).
bool legacy_magic_first(const Checkpoint::State& state) noexcept;
void read_tar(Checkpoint::State& state);
/// Safetensors fills tensors too (one dense tensor per storage); no pickle.
void read_safetensors(Checkpoint::State& state);

/// Sets (checkpoint_set.cpp). The first non-blank byte is '{' (an index file, or other JSON).
bool looks_like_json(const Bytes& bytes) noexcept;
/// An index file's set (state.file is the index; its directory holds the shards).
void read_set_index(Checkpoint::State& state);
/// The set an index in `dir` describes: the one `*.index.json` there.
std::unique_ptr<Checkpoint::State> read_set_directory(const std::filesystem::path& dir, const Options& options);
/// A set of files with no index: every tensor of each file, no name twice.
std::unique_ptr<Checkpoint::State> read_set_files(const std::vector<std::filesystem::path>& files,
                                                  const Options& options);
/// The files a set's index names, joined with its directory, in set order
/// (for verify, which checks each file even when the set does not open).
/// `index_or_dir` is an index file or a directory holding one.
std::vector<std::filesystem::path> set_files(const std::filesystem::path& index_or_dir);
/// The files a sharded set's index names (its weight_map's, sorted, each once), checked as the set
/// opener checks them (relative, beside or below the index). Raises kTorchBadSet, kTorchNotCheckpoint.
std::vector<std::string> set_index_files(const Bytes& index, const std::string& path);

/// Walks root (and constants_root) into State::tensors (interpret.cpp).
void interpret(Checkpoint::State& state);

/// No row of State::origins (State::tensor_origin).
inline constexpr std::size_t kNoOrigin = ~std::size_t{0};

/// Derives State::tensor_origin and State::object_tensors from State::origins (origins.cpp).
void index_origins(Checkpoint::State& state);

/// For public entry points given a caller's tensor: raises kInvalidArgument unless its size,
/// stride and offset are well formed and stay inside `available` bytes (validate.cpp).
void require_inside(const Tensor& t, std::uint64_t available);

/// Checks record sizes and every tensor against its storage (validate.cpp).
void validate(Checkpoint::State& state);

/// Finds the storages no tensor reaches (State::unreferenced) and reports them and
/// State::unknown_rebuilds through diagnose(); with Options::strict, either is
/// kTorchIncomplete naming the first (completeness.cpp).
void check_completeness(Checkpoint::State& state);


/// Raises a Stage::kTorch error.
[[noreturn]] void fail(ErrorCode code, std::string message, std::string item = {},
                       std::optional<std::uint64_t> offset = std::nullopt);

}  // namespace maploc::torch
