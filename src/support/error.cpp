// error.cpp - maploc::Error and the names of stages and error codes.
#include "maploc/error.h"

#include <cstdio>

namespace maploc {
namespace {

std::string decorate(Stage stage, const std::string& message, std::optional<std::uint64_t> offset,
                     const std::string& item) {
  std::string out{stage_name(stage)};
  out += ": ";
  out += message;
  if (offset) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%llx", static_cast<unsigned long long>(*offset));
    out += " at offset 0x";
    out += buf;
  }
  if (!item.empty()) {
    out += " in '";
    out += item;
    out += "'";
  }
  return out;
}

struct CodeName {
  ErrorCode code;
  std::string_view name;
};

// One row per ErrorCode; kept in the order of error.h.
constexpr CodeName kCodeNames[] = {
    {ErrorCode::kIoOpen, "kIoOpen"},
    {ErrorCode::kIoRead, "kIoRead"},
    {ErrorCode::kIoWrite, "kIoWrite"},
    {ErrorCode::kInvalidArgument, "kInvalidArgument"},
    {ErrorCode::kIoNoSpace, "kIoNoSpace"},
    {ErrorCode::kLimitMemory, "kLimitMemory"},
    {ErrorCode::kRemoteBadUrl, "kRemoteBadUrl"},
    {ErrorCode::kRemoteRequest, "kRemoteRequest"},
    {ErrorCode::kRemoteBadResponse, "kRemoteBadResponse"},
    {ErrorCode::kRemoteChanged, "kRemoteChanged"},
    {ErrorCode::kRemoteRedirects, "kRemoteRedirects"},
    {ErrorCode::kZipNotZip, "kZipNotZip"},
    {ErrorCode::kZipTruncated, "kZipTruncated"},
    {ErrorCode::kZipBadSignature, "kZipBadSignature"},
    {ErrorCode::kZipOffsetOutOfRange, "kZipOffsetOutOfRange"},
    {ErrorCode::kZipOverlappingRecords, "kZipOverlappingRecords"},
    {ErrorCode::kZipNameMismatch, "kZipNameMismatch"},
    {ErrorCode::kZipDuplicateName, "kZipDuplicateName"},
    {ErrorCode::kZipUnsupportedCompression, "kZipUnsupportedCompression"},
    {ErrorCode::kZipEncrypted, "kZipEncrypted"},
    {ErrorCode::kZipTooManyEntries, "kZipTooManyEntries"},
    {ErrorCode::kZipBadZip64, "kZipBadZip64"},
    {ErrorCode::kZipInflate, "kZipInflate"},
    {ErrorCode::kZipRecordNotFound, "kZipRecordNotFound"},
    {ErrorCode::kZipNoPrefix, "kZipNoPrefix"},
    {ErrorCode::kZipEmpty, "kZipEmpty"},
    {ErrorCode::kZipMultiDisk, "kZipMultiDisk"},
    {ErrorCode::kZipSizeMismatch, "kZipSizeMismatch"},
    {ErrorCode::kZipRecordTooLarge, "kZipRecordTooLarge"},
    {ErrorCode::kZipBadCentralDirectory, "kZipBadCentralDirectory"},
    {ErrorCode::kZipWriterMisuse, "kZipWriterMisuse"},
    {ErrorCode::kZipCrcMismatch, "kZipCrcMismatch"},
    {ErrorCode::kPickleTruncated, "kPickleTruncated"},
    {ErrorCode::kPickleUnknownOpcode, "kPickleUnknownOpcode"},
    {ErrorCode::kPickleStackUnderflow, "kPickleStackUnderflow"},
    {ErrorCode::kPickleMarkNotFound, "kPickleMarkNotFound"},
    {ErrorCode::kPickleMemoMissing, "kPickleMemoMissing"},
    {ErrorCode::kPickleBadArgument, "kPickleBadArgument"},
    {ErrorCode::kPickleTypeError, "kPickleTypeError"},
    {ErrorCode::kPickleUnsupportedOpcode, "kPickleUnsupportedOpcode"},
    {ErrorCode::kPickleTrailingData, "kPickleTrailingData"},
    {ErrorCode::kPickleLimitStackDepth, "kPickleLimitStackDepth"},
    {ErrorCode::kPickleLimitNesting, "kPickleLimitNesting"},
    {ErrorCode::kPickleLimitMemo, "kPickleLimitMemo"},
    {ErrorCode::kPickleLimitStringBytes, "kPickleLimitStringBytes"},
    {ErrorCode::kPickleLimitContainerItems, "kPickleLimitContainerItems"},
    {ErrorCode::kPickleLimitTotalBytes, "kPickleLimitTotalBytes"},
    {ErrorCode::kPicklePersistentId, "kPicklePersistentId"},
    {ErrorCode::kPickleUnwritable, "kPickleUnwritable"},
    {ErrorCode::kTorchNotCheckpoint, "kTorchNotCheckpoint"},
    {ErrorCode::kTorchPreviewFormat, "kTorchPreviewFormat"},
    {ErrorCode::kTorchUnsupportedFormat, "kTorchUnsupportedFormat"},
    {ErrorCode::kTorchBadLegacy, "kTorchBadLegacy"},
    {ErrorCode::kTorchBadTar, "kTorchBadTar"},
    {ErrorCode::kTorchBadPersistentId, "kTorchBadPersistentId"},
    {ErrorCode::kTorchUnknownDType, "kTorchUnknownDType"},
    {ErrorCode::kTorchStorageMissing, "kTorchStorageMissing"},
    {ErrorCode::kTorchRecordSize, "kTorchRecordSize"},
    {ErrorCode::kTorchBadTensor, "kTorchBadTensor"},
    {ErrorCode::kTorchTensorOutOfBounds, "kTorchTensorOutOfBounds"},
    {ErrorCode::kTorchStorageConflict, "kTorchStorageConflict"},
    {ErrorCode::kTorchBadSafetensors, "kTorchBadSafetensors"},
    {ErrorCode::kTorchNotConvertible, "kTorchNotConvertible"},
    {ErrorCode::kTorchLimitTensors, "kTorchLimitTensors"},
    {ErrorCode::kTorchLimitNameBytes, "kTorchLimitNameBytes"},
    {ErrorCode::kTorchLimitWalkBytes, "kTorchLimitWalkBytes"},
    {ErrorCode::kTorchLimitExpandedBytes, "kTorchLimitExpandedBytes"},
    {ErrorCode::kTorchIncomplete, "kTorchIncomplete"},
    {ErrorCode::kTorchBadSet, "kTorchBadSet"},
    {ErrorCode::kTorchBadDcp, "kTorchBadDcp"},
    {ErrorCode::kRemapCudaUnavailable, "kRemapCudaUnavailable"},
    {ErrorCode::kRemapNoSuchDevice, "kRemapNoSuchDevice"},
    {ErrorCode::kRemapUnknownTag, "kRemapUnknownTag"},
    {ErrorCode::kRemapBadSpec, "kRemapBadSpec"},
    {ErrorCode::kRemapConflictingRules, "kRemapConflictingRules"},
    {ErrorCode::kRemapOutOfMemory, "kRemapOutOfMemory"},
    {ErrorCode::kRemapCudaNotBuilt, "kRemapCudaNotBuilt"},
    {ErrorCode::kRemapDevice, "kRemapDevice"},
    {ErrorCode::kRemapStateDictMismatch, "kRemapStateDictMismatch"},
    {ErrorCode::kRemapBadRewriteTarget, "kRemapBadRewriteTarget"},
};

}  // namespace

std::string_view stage_name(Stage stage) {
  switch (stage) {
    case Stage::kIo: return "io";
    case Stage::kZip: return "zip";
    case Stage::kPickle: return "pickle";
    case Stage::kTorch: return "torch";
    case Stage::kRemap: return "remap";
    case Stage::kCli: return "cli";
  }
  return "unknown";
}

std::string_view error_code_name(ErrorCode code) {
  for (const auto& row : kCodeNames) {
    if (row.code == code) return row.name;
  }
  return "unknown";
}

Error::Error(ErrorCode code, Stage stage, std::string message, std::optional<std::uint64_t> offset,
             std::string item)
    : std::runtime_error(decorate(stage, message, offset, item)),
      code_(code),
      stage_(stage),
      offset_(offset),
      item_(std::move(item)),
      message_(std::move(message)) {}

}  // namespace maploc
