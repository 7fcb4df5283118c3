// disassemble.h - a pickletools.dis-compatible disassembler over the shared opcode table.
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <span>
#include <string>
#include <string_view>

namespace maploc::pickle {

/// One disassembled opcode, as handed to DisOptions::on_opcode.
struct DisLine {
  std::uint64_t offset;   ///< of the opcode byte
  std::uint8_t byte;      ///< the opcode byte
  std::string_view name;  ///< pickletools name ("BINPUT")
  std::string_view arg;   ///< the argument as pickletools prints it; empty when none
  std::string_view note;  ///< "(MARK at 5)", "(as 3)" or empty
  unsigned depth;         ///< MARK nesting level
};

/// Options of disassemble().
struct DisOptions {
  /// Called for every opcode as it is decoded (for structured output, e.g. JSON);
  /// the views are valid during the call only.
  std::function<void(const DisLine&)> on_opcode{};
  /// False: nothing is written to `out` (not even the trailer); the caller
  /// wants only on_opcode's lines, or only the end offset and the checks.
  bool write_text = true;
  /// Offset where the pickle starts; printed offsets are absolute.
  std::uint64_t start_offset = 0;
  /// Blanks per MARK level (pickletools' indentlevel).
  unsigned indent = 4;
  /// Reported as the item of errors.
  std::string stream_name{};
  /// LONG1/LONG4 ints with more digits print as Python's hex() ("0x..."),
  /// where pickletools (CPython >= 3.11) would raise ValueError; see
  /// Limits::pickle_max_int_digits. Decimal literals (INT, LONG) longer than
  /// 4300 digits are kPickleBadArgument, as int() refuses them.
  std::uint64_t max_int_digits = 4300;
};

/// Writes the disassembly of one pickle (from start_offset through the first
/// STOP) to `out`, byte-for-byte as CPython's `pickletools.dis(data, out)`
/// prints it, including the "highest protocol among opcodes = N" trailer.
/// Nothing is evaluated. Returns the offset just past STOP (equal to the
/// machine's Result::end_offset()). Lines are written as they are decoded, so
/// on error `out` holds the lines before (and, like pickletools, including)
/// the offending opcode; then maploc::Error (Stage::kPickle) is raised:
/// kPickleTruncated, kPickleUnknownOpcode, kPickleBadArgument,
/// kPickleStackUnderflow, kPickleMarkNotFound, kPickleMemoMissing,
/// kPickleLimitStringBytes.
std::uint64_t disassemble(std::span<const std::uint8_t> stream, std::ostream& out,
                          const DisOptions& options = {});

/// As above, returning the text.
std::string disassemble(std::span<const std::uint8_t> stream, const DisOptions& options = {});

}  // namespace maploc::pickle
