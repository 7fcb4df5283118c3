// state.h - what an opened Checkpoint holds, shared by the format readers (internal).
#pragma once

#include <cstdint>
#include <map>
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

namespace maploc::torch {

/// What one persistent id resolved to: a storage (or a view storage), seen
/// through the dtype the id named.
struct StorageRef {
  std::size_t storage = 0;       ///< index into State::storages
  DType dtype = DType::kUInt8;   ///< dtype of the storage class the id named
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
  /// Data of non-zip storages (views of the mapping); empty for zip.
  std::vector<Bytes> stream_bytes;
  std::vector<StorageRef> refs;  ///< Value::external handle -> reference
  /// Tar format: tensors of the 'tensors' member by key; the object pickle
  /// refers to the i-th as Value::external(kTarTensorHandle + i).
  std::map<std::string, Tensor> tar_tensors;

  /// Shared with every remap::Loaded made from this checkpoint (no copy per load).
  std::shared_ptr<std::vector<Tensor>> tensors_owner = std::make_shared<std::vector<Tensor>>();
  std::vector<Tensor>& tensors = *tensors_owner;
  std::vector<std::string> unknown_globals;
  std::vector<std::string> hints;
  /// Safetensors `__metadata__`, in file order.
  std::vector<std::pair<std::string, std::string>> metadata;

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
void read_tar(Checkpoint::State& state);
/// Safetensors fills tensors too (one dense tensor per storage); no pickle.
void read_safetensors(Checkpoint::State& state);

/// Walks root (and constants_root) into State::tensors (interpret.cpp).
void interpret(Checkpoint::State& state);

/// Checks record sizes and every tensor against its storage (validate.cpp).
void validate(Checkpoint::State& state);

/// Fills State::unknown_globals from the GLOBALs of the object pickle (allowlist.cpp).
std::vector<std::string> unknown_globals_of(const pickle::Result& result);

/// Raises a Stage::kTorch error.
[[noreturn]] void fail(ErrorCode code, std::string message, std::string item = {},
                       std::optional<std::uint64_t> offset = std::nullopt);

}  // namespace maploc::torch
