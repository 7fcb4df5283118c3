// disassemble.h - a pickletools.dis-compatible disassembler over the shared opcode table.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <span>
#include <string>

namespace maploc::pickle {

/// Options of disassemble().
struct DisOptions {
  /// Offset where the pickle starts; printed offsets are absolute.
  std::uint64_t start_offset = 0;
  /// Blanks per MARK level (pickletools' indentlevel).
  unsigned indent = 4;
  /// Reported as the item of errors.
  std::string stream_name{};
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
