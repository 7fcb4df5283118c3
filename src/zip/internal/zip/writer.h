// writer.h - a streaming zip writer that lays records out the way torch's PyTorchStreamWriter does.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "maploc/bytes.h"

namespace maploc::zip {

/// Layout choices.
struct WriterOptions {
  /// Every record's data starts at a multiple of this, measured from the
  /// start of the archive (torch: 64). A power of two, 1..65536.
  std::uint64_t alignment = 64;
  /// Compute CRC-32 (zlib's crc32) into descriptors and the central
  /// directory; false writes 0 like torch.serialization.set_crc32_options(False).
  bool crc32 = true;
};

/// Writes stored (method 0) records as torch does (pytorch-format.md §1.4-§1.7):
/// local headers with zero sizes and flags 0x0808, an `FB` extra field of
/// 'Z' bytes padding the data to the alignment, a data descriptor after
/// every non-empty record (24 bytes when the record needs ZIP64), a
/// central directory, and always a ZIP64 end record, its locator and the
/// classic end record. Records are streamed: nothing but the directory is
/// kept in memory.
///
/// Calls: (begin, write*, end)* then finish. Misuse (a write outside a
/// record, more or fewer bytes than begin declared, a duplicate name,
/// finish inside a record) raises kZipWriterMisuse.
class Writer {
 public:
  /// Raises kInvalidArgument when the alignment is not a power of two in 1..65536.
  explicit Writer(ByteSink sink, WriterOptions options = {});

  /// Starts a record of exactly `size` bytes named `name` (full name, e.g. "archive/data/0").
  void begin(std::string name, std::uint64_t size);
  /// Appends bytes to the open record.
  void write(std::span<const std::uint8_t> bytes);
  /// Closes the open record (writes its data descriptor).
  void end();
  /// begin + write + end for a record held in memory.
  void add(std::string name, std::span<const std::uint8_t> bytes);
  /// Writes the central directory and the end records. Nothing may follow.
  void finish();

  /// Bytes handed to the sink so far.
  std::uint64_t offset() const noexcept { return offset_; }
  /// Offset where the data of the most recently begun record starts.
  std::uint64_t last_data_offset() const noexcept { return data_offset_; }

 private:
  struct Entry {
    std::string name;
    std::uint64_t header_offset = 0;
    std::uint64_t size = 0;
    std::uint32_t crc = 0;
  };
  void emit(std::span<const std::uint8_t> bytes);
  void emit(const std::vector<std::uint8_t>& bytes) { emit(std::span<const std::uint8_t>(bytes)); }

  ByteSink sink_;
  WriterOptions options_;
  std::vector<Entry> entries_;
  std::uint64_t offset_ = 0;
  std::uint64_t data_offset_ = 0;
  std::uint64_t written_ = 0;  ///< bytes of the open record so far
  std::uint32_t crc_ = 0;
  bool open_ = false;
  bool finished_ = false;
};

}  // namespace maploc::zip
