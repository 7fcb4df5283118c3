// directory.cpp - end records, ZIP64 and the central directory (APPNOTE 6.3.x §4.3).
#include "directory.h"

#include <algorithm>
#include <cstdio>
#include <exception>
#include <numeric>
#include <system_error>
#include <thread>
#include <unordered_set>

#include "maploc/error.h"
#include "support/sniff.h"
#include "support/huge_chunks.h"
#include "support/little_endian.h"

namespace maploc::zip {
namespace {

using detail::in_bounds;
using detail::load_u16;
using detail::load_u32;
using detail::load_u64;

constexpr std::uint32_t kLocalHeaderSig = 0x04034b50;
constexpr std::uint32_t kCentralHeaderSig = 0x02014b50;
constexpr std::uint32_t kEocdSig = 0x06054b50;
constexpr std::uint32_t kZip64EocdSig = 0x06064b50;
constexpr std::uint32_t kZip64LocatorSig = 0x07064b50;
constexpr std::uint64_t kEocdSize = 22;
constexpr std::uint64_t kZip64EocdSize = 56;
constexpr std::uint64_t kZip64LocatorSize = 20;
constexpr std::uint64_t kCentralHeaderSize = 46;
constexpr std::uint64_t kLocalHeaderSize = 30;
constexpr std::uint64_t kMaxComment = 0xFFFF;
constexpr std::uint16_t kZip64ExtraId = 0x0001;
constexpr std::uint16_t kFlagEncrypted = 0x0001;
constexpr std::uint16_t kFlagStrongEncryption = 0x0040;

[[noreturn]] void fail(ErrorCode code, const std::string& path, std::string message,
                       std::optional<std::uint64_t> offset = std::nullopt) {
  throw Error(code, Stage::kZip, std::move(message), offset, path);
}

std::string hex(std::uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string in_quotes(const std::string& name) { return "'" + name + "'"; }

// The first bytes sometimes say what the file really is (a web page saved
// instead of the checkpoint, a git-lfs pointer); say it.
std::string content_hint(const Bytes& file) {
  auto kind = sniff_content(file.span().subspan(0, std::min<std::size_t>(file.size(), 512)));
  if (kind == ContentKind::kZip || kind == ContentKind::kUnknown) return "";
  return "; this looks like " + describe_content(kind);
}

// Searches back from the end for an EOCD whose comment fits in the file.
std::optional<std::uint64_t> locate_eocd(const Bytes& file) {
  const std::uint64_t size = file.size();
  if (size < kEocdSize) return std::nullopt;
  const std::uint64_t last = size - kEocdSize;
  const std::uint64_t first = last > kMaxComment ? last - kMaxComment : 0;
  for (std::uint64_t pos = last + 1; pos-- > first;) {
    const std::uint8_t* p = file.data() + pos;
    if (p[0] != 'P' || p[1] != 'K' || load_u32(p) != kEocdSig) continue;
    if (load_u16(p + 20) <= size - pos - kEocdSize) return pos;
  }
  return std::nullopt;
}

// Reads the ZIP64 end record that the locator before the EOCD points to.
// Returns the file offset where the ZIP64 record starts.
std::uint64_t read_zip64_end(const Bytes& file, const std::string& path, std::uint64_t locator,
                             DirectoryEnd& end) {
  const std::uint8_t* loc = file.data() + locator;
  const std::uint64_t stated = load_u64(loc + 8);
  if (load_u32(loc + 16) > 1) {
    fail(ErrorCode::kZipMultiDisk, path,
         "the ZIP64 locator declares " + std::to_string(load_u32(loc + 16)) +
             " disks; split archives are not supported (join the parts first)",
         locator);
  }
  // The record normally sits right before the locator; when bytes were
  // prepended to the archive its stated offset is short by that many bytes.
  std::uint64_t pos = locator >= kZip64EocdSize ? locator - kZip64EocdSize : 0;
  if (locator < kZip64EocdSize || load_u32(file.data() + pos) != kZip64EocdSig) {
    if (!in_bounds(stated, kZip64EocdSize, locator) || load_u32(file.data() + stated) != kZip64EocdSig) {
      fail(ErrorCode::kZipBadZip64, path,
           "the ZIP64 locator points to offset " + hex(stated) +
               " but no ZIP64 end-of-central-directory record is there (the file is corrupted)",
           locator);
    }
    pos = stated;
  }
  const std::uint8_t* z = file.data() + pos;
  if (load_u32(z + 16) != 0 || load_u32(z + 20) != 0) {
    fail(ErrorCode::kZipMultiDisk, path, "the ZIP64 end record names a disk other than 0; split archives are not supported", pos);
  }
  const std::uint64_t entries_disk = load_u64(z + 24);
  end.entries = load_u64(z + 32);
  end.cd_size = load_u64(z + 40);
  end.cd_offset = load_u64(z + 48);
  if (entries_disk != end.entries) {
    fail(ErrorCode::kZipMultiDisk, path,
         "the ZIP64 end record counts " + std::to_string(entries_disk) + " entries on this disk but " +
             std::to_string(end.entries) + " in all; split archives are not supported",
         pos);
  }
  end.zip64 = true;
  return pos;
}

}  // namespace

DirectoryEnd find_directory_end(const Bytes& file, const std::string& path, const Limits& limits) {
  const std::uint64_t size = file.size();
  auto eocd = locate_eocd(file);
  if (!eocd) {
    const std::uint64_t searched = std::min<std::uint64_t>(size, kEocdSize + kMaxComment);
    fail(ErrorCode::kZipNotZip, path,
         "no end-of-central-directory record in the last " + std::to_string(searched) +
             " bytes of a file of " + std::to_string(size) +
             " bytes: the file is truncated or is not a zip archive" + content_hint(file));
  }
  DirectoryEnd end;
  end.eocd_offset = *eocd;
  const std::uint8_t* e = file.data() + *eocd;
  const std::uint16_t disk = load_u16(e + 4), cd_disk = load_u16(e + 6);
  const std::uint16_t entries_disk = load_u16(e + 8), entries = load_u16(e + 10);
  end.entries = entries;
  end.cd_size = load_u32(e + 12);
  end.cd_offset = load_u32(e + 16);

  std::uint64_t cd_end = *eocd;  // the directory ends where the end records begin
  const bool has_locator = *eocd >= kZip64LocatorSize &&
                           load_u32(file.data() + *eocd - kZip64LocatorSize) == kZip64LocatorSig;
  if (has_locator) {
    cd_end = read_zip64_end(file, path, *eocd - kZip64LocatorSize, end);
  } else {
    if (disk != 0 || cd_disk != 0 || entries_disk != entries) {
      fail(ErrorCode::kZipMultiDisk, path, "the archive spans several disks; split archives are not supported", *eocd);
    }
    if (entries == 0xFFFF || end.cd_size == 0xFFFFFFFF || end.cd_offset == 0xFFFFFFFF) {
      fail(ErrorCode::kZipBadZip64, path,
           "the end-of-central-directory record has saturated ZIP64 fields but no ZIP64 locator precedes it",
           *eocd);
    }
  }

  if (end.entries > limits.zip_max_entries) {
    fail(ErrorCode::kZipTooManyEntries, path,
         "the archive declares " + std::to_string(end.entries) + " entries, above the limit of " +
             std::to_string(limits.zip_max_entries) + " (raise Limits::zip_max_entries)",
         *eocd);
  }
  if (end.cd_size > cd_end) {
    fail(ErrorCode::kZipOffsetOutOfRange, path,
         "the central directory claims " + std::to_string(end.cd_size) + " bytes but only " +
             std::to_string(cd_end) + " bytes precede the end records (truncated or corrupted)",
         *eocd);
  }
  if (end.entries > end.cd_size / kCentralHeaderSize) {
    fail(ErrorCode::kZipTooManyEntries, path,
         "the archive declares " + std::to_string(end.entries) + " entries but its central directory of " +
             std::to_string(end.cd_size) + " bytes can hold at most " +
             std::to_string(end.cd_size / kCentralHeaderSize) + " (corrupted count)",
         *eocd);
  }
  end.cd_start = cd_end - end.cd_size;
  if (end.cd_offset > end.cd_start) {
    fail(ErrorCode::kZipOffsetOutOfRange, path,
         "the central directory offset " + hex(end.cd_offset) + " lies beyond where the directory can start (" +
             hex(end.cd_start) + "): the file is truncated or corrupted",
         *eocd);
  }
  end.base = end.cd_start - end.cd_offset;
  if (end.entries == 0) {
    fail(ErrorCode::kZipEmpty, path, "the archive does not contain any records", *eocd);
  }
  return end;
}

namespace {

// Replaces saturated 32-bit fields with the values of the ZIP64 extra field,
// in APPNOTE order: uncompressed size, compressed size, local header offset.
void apply_zip64_extra(const std::uint8_t* extra, std::uint64_t extra_len, Record& r,
                       bool need_size, bool need_comp, bool need_offset, const std::string& path,
                       std::uint64_t entry_offset) {
  std::uint64_t pos = 0;
  while (extra_len - pos >= 4) {
    const std::uint16_t id = load_u16(extra + pos), len = load_u16(extra + pos + 2);
    pos += 4;
    if (len > extra_len - pos) break;
    if (id == kZip64ExtraId) {
      const std::uint64_t needed = 8u * (need_size + need_comp + need_offset);
      if (len < needed) break;
      const std::uint8_t* v = extra + pos;
      if (need_size) { r.size = load_u64(v); v += 8; }
      if (need_comp) { r.compressed_size = load_u64(v); v += 8; }
      if (need_offset) { r.header_offset = load_u64(v); }
      return;
    }
    pos += len;
  }
  fail(ErrorCode::kZipBadZip64, path,
       "central-directory entry " + in_quotes(r.name) +
           " has saturated 32-bit fields but no complete ZIP64 extra field to hold the real values",
       entry_offset);
}

Record parse_central_entry(const Bytes& file, const std::string& path, std::uint64_t pos,
                           std::uint64_t cd_end, std::size_t index) {
  if (!in_bounds(pos, kCentralHeaderSize, cd_end)) {
    fail(ErrorCode::kZipBadCentralDirectory, path,
         "central-directory entry #" + std::to_string(index) + " runs past the end of the directory", pos);
  }
  const std::uint8_t* h = file.data() + pos;
  if (load_u32(h) != kCentralHeaderSig) {
    fail(ErrorCode::kZipBadSignature, path,
         "central-directory entry #" + std::to_string(index) + " has signature " + hex(load_u32(h)) +
             ", expected 0x02014b50 ('PK\\1\\2'): the directory is corrupted",
         pos);
  }
  const std::uint64_t name_len = load_u16(h + 28), extra_len = load_u16(h + 30), comment_len = load_u16(h + 32);
  if (!in_bounds(pos + kCentralHeaderSize, name_len + extra_len + comment_len, cd_end)) {
    fail(ErrorCode::kZipBadCentralDirectory, path,
         "the name, extra field and comment of central-directory entry #" + std::to_string(index) +
             " run past the end of the directory",
         pos);
  }
  Record r{};
  r.name.assign(reinterpret_cast<const char*>(h + kCentralHeaderSize), name_len);
  r.flags = load_u16(h + 8);
  r.method = load_u16(h + 10);
  r.crc32 = load_u32(h + 16);
  r.compressed_size = load_u32(h + 20);
  r.size = load_u32(h + 24);
  r.header_offset = load_u32(h + 42);
  const std::uint16_t disk_start = load_u16(h + 34);
  if (disk_start != 0 && disk_start != 0xFFFF) {
    fail(ErrorCode::kZipMultiDisk, path, "record " + in_quotes(r.name) + " starts on disk " +
         std::to_string(disk_start) + "; split archives are not supported", pos);
  }
  const bool need_size = r.size == 0xFFFFFFFF, need_comp = r.compressed_size == 0xFFFFFFFF,
             need_offset = r.header_offset == 0xFFFFFFFF;
  if (need_size || need_comp || need_offset) {
    apply_zip64_extra(h + kCentralHeaderSize + name_len, extra_len, r, need_size, need_comp, need_offset,
                      path, pos);
  }
  if (r.flags & (kFlagEncrypted | kFlagStrongEncryption)) {
    fail(ErrorCode::kZipEncrypted, path, "record " + in_quotes(r.name) + " is encrypted; maploc reads only unencrypted archives", pos);
  }
  if (r.method != kMethodStored && r.method != kMethodDeflated) {
    fail(ErrorCode::kZipUnsupportedCompression, path,
         "record " + in_quotes(r.name) + " uses compression method " + std::to_string(r.method) +
             "; only stored (0) and deflate (8) are supported (re-save it with torch.save)",
         pos);
  }
  if (r.method == kMethodStored && r.compressed_size != r.size) {
    fail(ErrorCode::kZipSizeMismatch, path,
         "stored record " + in_quotes(r.name) + " has compressed size " + std::to_string(r.compressed_size) +
             " but size " + std::to_string(r.size) + ": the directory is corrupted",
         pos);
  }
  return r;
}

}  // namespace

// Finds the record's data through its local header (whose extra field holds
// torch's FB padding, so its length differs from the central directory's).
void locate_record(const Bytes& file, const std::string& path, const DirectoryEnd& end, Record& r) {
  auto abs = detail::checked_add(end.base, r.header_offset);
  if (!abs || !in_bounds(*abs, kLocalHeaderSize, end.cd_start)) {
    fail(ErrorCode::kZipOffsetOutOfRange, path,
         "the local header of record " + in_quotes(r.name) + " at " + hex(r.header_offset) +
             " lies outside the " + std::to_string(end.cd_start) + " bytes before the central directory",
         end.cd_start);
  }
  const std::uint8_t* h = file.data() + *abs;
  if (load_u32(h) != kLocalHeaderSig) {
    fail(ErrorCode::kZipBadSignature, path,
         "the local header of record " + in_quotes(r.name) + " has signature " + hex(load_u32(h)) +
             ", expected 0x04034b50 ('PK\\3\\4'): invalid header or the archive is corrupted",
         *abs);
  }
  const std::uint64_t name_len = load_u16(h + 26), extra_len = load_u16(h + 28);
  const std::uint64_t name_at = *abs + kLocalHeaderSize;
  if (!in_bounds(name_at, name_len + extra_len, end.cd_start)) {
    fail(ErrorCode::kZipTruncated, path,
         "the name and extra field of the local header of record " + in_quotes(r.name) +
             " run past the start of the central directory",
         *abs);
  }
  std::string_view local_name(reinterpret_cast<const char*>(file.data() + name_at), name_len);
  if (local_name != r.name) {
    fail(ErrorCode::kZipNameMismatch, path,
         "the local header names " + in_quotes(std::string(local_name)) + " but the central directory names " +
             in_quotes(r.name) + " for the same record: the archive is corrupted",
         *abs);
  }
  if (load_u16(h + 6) & (kFlagEncrypted | kFlagStrongEncryption)) {
    fail(ErrorCode::kZipEncrypted, path, "record " + in_quotes(r.name) + " is encrypted; maploc reads only unencrypted archives", *abs);
  }
  r.header_offset = *abs;
  r.data_offset = name_at + name_len + extra_len;
  if (!in_bounds(r.data_offset, r.compressed_size, end.cd_start)) {
    fail(ErrorCode::kZipOffsetOutOfRange, path,
         "record " + in_quotes(r.name) + " claims " + std::to_string(r.compressed_size) + " bytes at " +
             hex(r.data_offset) + ", past the start of the central directory at " + hex(end.cd_start) +
             " (truncated or corrupted)",
         r.data_offset);
  }
}

namespace {

// Each local header is a page fault when the records lie pages apart (a
// fault per small tensor: docs/performance.md). Large directories are
// located in parallel chunks; the earliest failing record is reported, as a
// sequential pass would.
void locate_all(const Bytes& file, const std::string& path, const DirectoryEnd& end, std::vector<Record>& records) {
  constexpr std::size_t kPerThread = 4096;
  const std::size_t hw = std::max(1u, std::thread::hardware_concurrency());
  const std::size_t chunks = std::min<std::size_t>({hw, 8, records.size() / kPerThread});
  if (chunks < 2) {
    for (Record& r : records) locate_record(file, path, end, r);
    return;
  }
  std::vector<std::exception_ptr> errors(chunks);
  auto work = [&](std::size_t c) {
    const std::size_t lo = records.size() * c / chunks, hi = records.size() * (c + 1) / chunks;
    try {
      for (std::size_t i = lo; i < hi; ++i) locate_record(file, path, end, records[i]);
    } catch (...) {
      errors[c] = std::current_exception();
    }
  };
  {
    std::vector<std::jthread> helpers;
    helpers.reserve(chunks - 1);
    for (std::size_t c = 1; c < chunks; ++c) {
      try {
        helpers.emplace_back(work, c);
      } catch (const std::system_error&) {
        work(c);  // no thread to be had: the chunk runs here
      }
    }
    work(0);
  }
  for (const auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

// No two records may share bytes (the overlapping-file zip bomb, and a
// corrupt directory pointing two names at one header).
void check_overlaps(const std::vector<Record>& records, const std::string& path) {
  std::vector<std::uint32_t> order(records.size());
  std::iota(order.begin(), order.end(), 0u);
  const auto by_offset = [&](std::uint32_t a, std::uint32_t b) {
    return records[a].header_offset < records[b].header_offset;
  };
  // A writer appends records in offset order: one linear pass finds that out.
  if (!std::is_sorted(order.begin(), order.end(), by_offset)) std::sort(order.begin(), order.end(), by_offset);
  for (std::size_t i = 1; i < order.size(); ++i) {
    const Record& prev = records[order[i - 1]];
    const Record& next = records[order[i]];
    if (prev.data_offset + prev.compressed_size > next.header_offset) {
      fail(ErrorCode::kZipOverlappingRecords, path,
           "records " + in_quotes(prev.name) + " and " + in_quotes(next.name) +
               " overlap (the second starts at " + hex(next.header_offset) +
               " inside the first): corrupted or a crafted zip bomb",
           next.header_offset);
    }
  }
}

}  // namespace

std::vector<Record> read_central_directory(const Bytes& file, const std::string& path, const DirectoryEnd& end,
                                           bool locate) {
  const std::uint64_t cd_end = end.cd_start + end.cd_size;
  std::vector<Record> records;
  records.reserve(static_cast<std::size_t>(end.entries));
  maploc::detail::prefer_huge_pages(records.data(), records.capacity() * sizeof(Record));
  std::uint64_t pos = end.cd_start;
  for (std::uint64_t i = 0; i < end.entries; ++i) {
    Record r = parse_central_entry(file, path, pos, cd_end, static_cast<std::size_t>(i));
    pos += kCentralHeaderSize + load_u16(file.data() + pos + 28) + load_u16(file.data() + pos + 30) +
           load_u16(file.data() + pos + 32);
    records.push_back(std::move(r));
  }
  if (locate) locate_records(file, path, end, records, {});
  return records;
}

void locate_records(const Bytes& file, const std::string& path, const DirectoryEnd& end, std::vector<Record>& records,
                    std::span<const std::uint32_t> already) {
  if (already.empty()) {
    locate_all(file, path, end, records);
  } else {
    std::vector<bool> skip(records.size(), false);
    for (const std::uint32_t i : already) skip[i] = true;
    for (std::size_t i = 0; i < records.size(); ++i) {
      if (!skip[i]) locate_record(file, path, end, records[i]);
    }
  }
  check_overlaps(records, path);
}

}  // namespace maploc::zip
