// limits.h - every resource limit maploc enforces on untrusted input, in one place.
#pragma once

#include <cstdint>

namespace maploc {

/// Limits checked before any allocation whose size comes from a file. Each
/// error raised for a limit names the field to raise. Defaults are generous
/// for real checkpoints (a 100 GB LLM shard, a 1M-tensor state_dict).
struct Limits {
  // zip
  /// Most central-directory entries an archive may declare.
  std::uint64_t zip_max_entries = 1u << 22;
  /// Largest record that may be inflated into memory (deflated records only).
  std::uint64_t zip_max_inflated_bytes = std::uint64_t{1} << 32;
  /// Largest inflated/compressed ratio accepted for a deflated record.
  std::uint64_t zip_max_compression_ratio = 1024;

  // pickle
  /// Most values on the pickle stack (all mark frames together).
  std::uint64_t pickle_max_stack_depth = 1u << 20;
  /// Deepest nesting of containers/objects the value tree may have.
  std::uint64_t pickle_max_nesting_depth = 1000;
  /// Most memo entries.
  std::uint64_t pickle_max_memo_entries = 1u << 24;
  /// Longest single str/bytes value.
  std::uint64_t pickle_max_string_bytes = std::uint64_t{1} << 31;
  /// Most items in a single list/tuple/dict/set.
  std::uint64_t pickle_max_container_items = 1u << 26;
  /// Total bytes the machine may allocate for values while reading one stream.
  std::uint64_t pickle_max_total_bytes = std::uint64_t{1} << 32;
  /// Most decimal digits an int is printed with (names, `dis`), as CPython's
  /// default sys.int_info.default_max_str_digits: int-to-decimal is quadratic.
  /// A larger int prints as Python's hex() ("0x..."), which is linear. Never an error.
  std::uint64_t pickle_max_int_digits = 4300;

  // torch
  /// Most dimensions a tensor may have (torch's own cap is 64 dims).
  /// Raises kTorchBadTensor (kTorchBadTar in the 0.1.x tar format).
  std::uint64_t torch_max_rank = 64;
  /// Most object paths the tensor walk may visit. Containers shared through
  /// the memo are walked once per path, so a few KB of pickle can name 2^60
  /// paths (billion laughs); 2^26 is far above a 1M-tensor state_dict.
  /// Raises kPickleLimitContainerItems.
  std::uint64_t torch_max_walk_paths = std::uint64_t{1} << 26;
  /// Most tensors a checkpoint may list (every path to a tensor is one: a
  /// few KB of memo-shared references can name millions). 2^19 holds a
  /// 500,000-tensor state_dict (the largest single files hold tens of
  /// thousands); each tensor listed costs about 350 bytes, so a 1 KB bomb
  /// stays under 0.2 GB. Raise it (maploc --limit) for a bigger file. Checked before the tensor is made; in a
  /// safetensors header it bounds the tensors and the __metadata__ entries
  /// (each), which are parsed straight into entries, no JSON tree. Raises kTorchLimitTensors.
  std::uint64_t torch_max_tensors = std::uint64_t{1} << 19;
  /// Longest name (keys joined with '.') of any object the walk visits.
  /// Raises kTorchLimitNameBytes.
  std::uint64_t torch_max_name_bytes = std::uint64_t{1} << 16;
  /// Bytes the walk may build in all: the text of every path name it forms,
  /// plus each tensor it lists (its record, name, shape and stride). Bounds
  /// the memory and time of a shared-reference bomb: 2^28 holds a
  /// 500,000-tensor state_dict with 60-byte names (about 450 bytes each) and
  /// keeps a bomb of long names near half a second. Raises kTorchLimitWalkBytes.
  std::uint64_t torch_max_walk_bytes = std::uint64_t{1} << 28;
  /// Most bytes an expanded view may produce when its values are copied out in row-major order
  /// (torch::tensor_sha256, contiguous_bytes, for_each_value_chunk; Loaded::tensor_sha256 and
  /// load_into; `ls --hash`, convert). Only views whose values outnumber the storage bytes they
  /// reach count (stride 0, overlapping strides: `torch.zeros(1).expand(2**40)` is 4 TiB of values
  /// from 4 bytes on disk); a tensor that reads each stored byte once is bounded by the file.
  /// Checked before the first byte is produced. Raises kTorchLimitExpandedBytes.
  std::uint64_t torch_max_expanded_bytes = std::uint64_t{1} << 32;
};

}  // namespace maploc
