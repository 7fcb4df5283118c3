// error.h - the one exception type that crosses maploc's public API.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace maploc {

/// Stable, explicitly numbered error codes. Numbers never change meaning once
/// released; new codes are appended inside their module's block.
///   1-99 support and I/O, 100-199 zip, 200-299 pickle, 300-399 torch,
///   400-499 remap, 500-599 cli.
enum class ErrorCode : std::uint16_t {
  // support / I/O
  kIoOpen = 1,         ///< the file could not be opened or stat'ed
  kIoRead = 2,         ///< reading the file failed
  kIoWrite = 3,        ///< writing a file failed
  kInvalidArgument = 4,///< an API argument is out of its documented range
  kIoNoSpace = 5,      ///< writing stopped because the disk or the file-size limit (RLIMIT_FSIZE) is full
  kLimitMemory = 6,    ///< an allocation failed (the process's memory or address-space limit) before any Limits bound was reached
  // remote sources (docs/remote.md)
  kRemoteBadUrl = 20,      ///< a URL maploc cannot read: unknown scheme, malformed, or a source kind not read by URL
  kRemoteRequest = 21,     ///< a request failed after its retries: connection, TLS, an HTTP error status
  kRemoteBadResponse = 22, ///< an answer that does not fit the request: wrong Content-Range, short body, Range ignored
  kRemoteChanged = 23,     ///< the object changed while it was read (412 on If-Match, another ETag or size)
  kRemoteRedirects = 24,   ///< a redirect not followed: too many (a loop), or refused (https to http, another origin for a signed request)

  // zip
  kZipNotZip = 100,             ///< no end-of-central-directory record: truncated or not a zip
  kZipTruncated = 101,          ///< a structure runs past the end of the file
  kZipBadSignature = 102,       ///< a header does not start with its APPNOTE signature
  kZipOffsetOutOfRange = 103,   ///< an offset or size points outside the file
  kZipOverlappingRecords = 104, ///< two records (or a record and the directory) share bytes
  kZipNameMismatch = 105,       ///< local and central headers disagree on a record's name
  kZipDuplicateName = 106,      ///< two records have the same name
  kZipUnsupportedCompression = 107, ///< compression method other than stored or deflate
  kZipEncrypted = 108,          ///< an entry is encrypted
  kZipTooManyEntries = 109,     ///< entry count above Limits::zip_max_entries or impossible for the directory size
  kZipBadZip64 = 110,           ///< a ZIP64 record or extra field is missing or malformed
  kZipInflate = 111,            ///< zlib failed to inflate a deflated record
  kZipRecordNotFound = 112,     ///< no record of that name
  kZipNoPrefix = 113,           ///< an entry is not under the archive's top-level folder
  kZipEmpty = 114,              ///< the archive holds no records
  kZipMultiDisk = 115,          ///< split/spanned archives are not supported
  kZipSizeMismatch = 116,       ///< inflated size differs from the declared size
  kZipRecordTooLarge = 117,     ///< an inflated record exceeds Limits::zip_max_inflated_bytes
  kZipBadCentralDirectory = 118,///< the central directory is malformed
  kZipWriterMisuse = 119,       ///< zip::Writer: a record's bytes differ from its declared size, or a call out of order
  kZipCrcMismatch = 120,        ///< a record's CRC-32 differs from the one its writer stored

  // pickle (codes 200-299 are owned by src/pickle)
  kPickleTruncated = 200,       ///< the stream ends inside an opcode or before STOP
  kPickleUnknownOpcode = 201,   ///< a byte that is no pickle opcode
  kPickleStackUnderflow = 202,  ///< an opcode needs more stack items than there are
  kPickleMarkNotFound = 203,    ///< an opcode needs a MARK and there is none
  kPickleMemoMissing = 204,     ///< GET of a memo index that was never PUT
  kPickleBadArgument = 205,     ///< an opcode argument is malformed (text int, escape, UTF-8)
  kPickleTypeError = 206,       ///< an opcode is applied to a value of the wrong kind
  kPickleUnsupportedOpcode = 207, ///< an opcode that needs Python (EXT*, out-of-band buffers)
  kPickleTrailingData = 208,    ///< bytes after STOP where none are allowed
  kPickleLimitStackDepth = 210, ///< Limits::pickle_max_stack_depth exceeded
  kPickleLimitNesting = 211,    ///< Limits::pickle_max_nesting_depth exceeded
  kPickleLimitMemo = 212,       ///< Limits::pickle_max_memo_entries exceeded
  kPickleLimitStringBytes = 213,///< Limits::pickle_max_string_bytes exceeded
  kPickleLimitContainerItems = 214, ///< Limits::pickle_max_container_items exceeded
  kPickleLimitTotalBytes = 215, ///< Limits::pickle_max_total_bytes exceeded
  kPicklePersistentId = 216,    ///< the persistent-id callback rejected an id or none was given
  kPickleUnwritable = 217,      ///< pickle::write met a value it cannot emit (an external handle without a callback)

  // torch (codes 300-399 are owned by src/torch)
  kTorchNotCheckpoint = 300,    ///< the content is not a torch checkpoint (the message says what it looks like)
  kTorchPreviewFormat = 301,    ///< a "PYTORCH1" archive from the preview release
  kTorchUnsupportedFormat = 302,///< a torch format maploc does not read (mobile flatbuffer, model.json TorchScript)
  kTorchBadLegacy = 303,        ///< the legacy stream's magic, protocol version, key list or storage counts are wrong
  kTorchBadTar = 304,           ///< the 0.1.x tar format is malformed
  kTorchBadPersistentId = 305,  ///< a persistent id that is not a well-formed ('storage', ...) tuple
  kTorchUnknownDType = 306,     ///< a storage type or dtype that does not exist
  kTorchStorageMissing = 307,   ///< a storage's record or data is absent
  kTorchRecordSize = 308,       ///< a storage's bytes differ from numel x element size
  kTorchBadTensor = 309,        ///< rebuild arguments of the wrong shape or kind (negative stride, rank too high, ...)
  kTorchTensorOutOfBounds = 310,///< a tensor's elements reach past the end of its storage
  kTorchStorageConflict = 311,  ///< one storage key referenced with incompatible sizes
  kTorchBadSafetensors = 312,   ///< a .safetensors file whose header or data ranges are malformed
  kTorchNotConvertible = 313,   ///< a tensor or dtype the target format cannot hold (sparse to safetensors, ...)
  kTorchLimitTensors = 314,     ///< more tensors (or safetensors header entries) than Limits::torch_max_tensors
  kTorchLimitNameBytes = 315,   ///< an object's name is longer than Limits::torch_max_name_bytes
  kTorchLimitWalkBytes = 316,   ///< the walk built more than Limits::torch_max_walk_bytes of names and tensors
  kTorchLimitExpandedBytes = 317, ///< an expanded view's values exceed Limits::torch_max_expanded_bytes
  kTorchIncomplete = 318,       ///< strict: a storage no named tensor reaches, or a rebuild function maploc does not know
  kTorchBadSet = 340,           ///< a sharded set's index or files disagree (missing file or tensor, name listed twice)
  kTorchBadDcp = 341,           ///< a torch.distributed.checkpoint's .metadata or chunks do not fit together

  // remap (codes 400-499 are owned by src/remap)
  kRemapCudaUnavailable = 400,  ///< a storage must go to CUDA but no CUDA device is usable
  kRemapNoSuchDevice = 401,     ///< a CUDA device index beyond the devices present
  kRemapUnknownTag = 402,       ///< a location tag maploc cannot place (mps, xpu:0, ...) and no rule maps it
  kRemapBadSpec = 403,          ///< a map-location SPEC or rule target that does not parse
  kRemapConflictingRules = 404, ///< two name rules claim one storage for different devices
  kRemapOutOfMemory = 405,      ///< the plan does not fit a device's free memory
  kRemapCudaNotBuilt = 406,     ///< CUDA or pinned placement asked of a build without CUDA
  kRemapDevice = 407,           ///< the CUDA runtime failed (allocation, copy, synchronisation)
  kRemapStateDictMismatch = 408,///< load_into: missing/unexpected names, or a dtype/shape mismatch
  kRemapBadRewriteTarget = 409, ///< a location rewrite to a device no file can be tagged with (meta)
};

/// Pipeline stage in which an error was raised.
enum class Stage : std::uint8_t { kIo, kZip, kPickle, kTorch, kRemap, kCli };

/// Short lower-case name of a stage ("zip", "pickle", ...).
std::string_view stage_name(Stage stage);

/// The symbolic name of a code ("kZipTruncated"); "unknown" for others.
std::string_view error_code_name(ErrorCode code);

/// The exception thrown by every maploc function on bad input or failure.
/// what() is the full, actionable message: "<stage>: <message>" followed by
/// " at offset 0x.. in '<item>'" when those are known.
class Error : public std::runtime_error {
 public:
  /// offset: byte offset in the file or stream where the problem applies.
  /// item: what was being read (record name, opcode, tensor name, file path).
  Error(ErrorCode code, Stage stage, std::string message,
        std::optional<std::uint64_t> offset = std::nullopt, std::string item = {});

  ErrorCode code() const noexcept { return code_; }
  Stage stage() const noexcept { return stage_; }
  std::optional<std::uint64_t> offset() const noexcept { return offset_; }
  const std::string& item() const noexcept { return item_; }
  /// The message without stage, offset and item decorations.
  const std::string& message() const noexcept { return message_; }

 private:
  ErrorCode code_;
  Stage stage_;
  std::optional<std::uint64_t> offset_;
  std::string item_;
  std::string message_;
};

}  // namespace maploc
