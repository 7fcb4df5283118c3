// machine.h - the inert pickle machine: a pickle stream (protocols 0-5) in, a value tree out.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "maploc/bytes.h"
#include "maploc/limits.h"
#include "maploc/pickle/value.h"

namespace maploc::pickle {

/// How Python 2 strings (STRING, BINSTRING, SHORT_BINSTRING) come back,
/// mirroring the `encoding` argument of Python's Unpickler.
enum class StringDecoding : std::uint8_t {
  kLatin1,  ///< as str, each byte one code point (torch's legacy loads)
  kBytes,   ///< as bytes, untouched
};

/// Resolves a persistent id (PERSID/BINPERSID). Receives the id and the
/// stream offset of the opcode; returns the value that takes the id's place
/// (typically Value::external(handle) into the caller's own table), or
/// nullopt to reject it (the machine then raises kPicklePersistentId).
/// The id, and anything reachable from it, lives as long as the Result.
/// The callback may throw maploc::Error itself.
using PersistentLoad = std::function<std::optional<Value>(const Value& pid, std::uint64_t offset)>;

/// Everything run() needs besides the bytes.
struct Options {
  /// The limits checked before anything is allocated (pickle_* fields).
  Limits limits{};
  /// Empty: each persistent id becomes a kPersistent node holding the id.
  PersistentLoad persistent_load{};
  /// Decoding of Python 2 strings (default latin1, like torch's legacy load).
  StringDecoding python2_strings = StringDecoding::kLatin1;
  /// Reported as the item of every error, e.g. "archive/data.pkl".
  std::string stream_name{};
  /// Offset in the stream where the pickle starts (several pickles may sit
  /// back to back, as in torch's legacy format).
  std::uint64_t start_offset = 0;
  /// Accept bytes after STOP (otherwise kPickleTrailingData); the caller
  /// reads Result::end_offset to find the next pickle.
  bool allow_trailing = false;
};

namespace detail {
class Arena;
}

/// The outcome of one run: the root value and the arena that owns the tree.
/// Move-only; every Value reachable from root() lives as long as the Result.
class Result {
 public:
  Result(Result&&) noexcept;
  Result& operator=(Result&&) noexcept;
  ~Result();

  /// The value STOP returned.
  const Value& root() const noexcept { return root_; }
  /// Offset just past the STOP opcode.
  std::uint64_t end_offset() const noexcept { return end_offset_; }
  /// The PROTO argument, 0 when the stream has none.
  std::uint8_t protocol() const noexcept { return protocol_; }
  /// Opcodes executed, STOP included.
  std::uint64_t opcode_count() const noexcept { return opcode_count_; }
  /// Every kGlobal node created (GLOBAL, STACK_GLOBAL, INST), in stream
  /// order; the caller lists the ones it does not know.
  std::span<const Value> globals() const noexcept;

 private:
  friend class Machine;
  friend Result run(std::span<const std::uint8_t> stream, const struct Options& options);
  friend Result run(const Bytes& stream, const struct Options& options);
  explicit Result(std::size_t stream_bytes);
  std::unique_ptr<detail::Arena> arena_;
  Bytes keep_alive_;
  Value root_;
  std::uint64_t end_offset_ = 0;
  std::uint64_t opcode_count_ = 0;
  std::uint8_t protocol_ = 0;
};

/// Runs the pickle machine over stream[options.start_offset, ...) through
/// the first STOP. Nothing is imported, called or evaluated; the only calls
/// interpreted (as pure data transformations) are `_codecs.encode(str,
/// 'latin1')` -> bytes and `builtins.bytearray(...)` -> bytearray.
/// Values may view into `stream`: its bytes must outlive the Result.
/// Raises maploc::Error with Stage::kPickle, the opcode's offset and
/// options.stream_name: kPickleTruncated, kPickleUnknownOpcode,
/// kPickleStackUnderflow, kPickleMarkNotFound, kPickleMemoMissing,
/// kPickleBadArgument, kPickleTypeError, kPickleUnsupportedOpcode,
/// kPickleTrailingData, kPicklePersistentId, kPickleLimit*; kInvalidArgument
/// when start_offset is past the end.
Result run(std::span<const std::uint8_t> stream, const Options& options = {});

/// Deleted: values would view into a vector destroyed at the end of the call's expression.
Result run(std::vector<std::uint8_t>&& stream, const Options& options = {}) = delete;

/// As above; the Result keeps `stream` alive, so values may outlive the caller's copy.
Result run(const Bytes& stream, const Options& options = {});

}  // namespace maploc::pickle
