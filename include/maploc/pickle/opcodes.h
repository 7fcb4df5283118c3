// opcodes.h - the one table of pickle opcodes (protocols 0-5), shared by the machine and the disassembler.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace maploc::pickle {

/// How an opcode's argument is encoded in the stream; names follow the
/// ArgumentDescriptor names of CPython's Lib/pickletools.py.
enum class ArgKind : std::uint8_t {
  kNone,                   ///< no argument
  kUint1,                  ///< 1-byte unsigned
  kUint2,                  ///< 2-byte little-endian unsigned
  kInt4,                   ///< 4-byte little-endian signed
  kUint4,                  ///< 4-byte little-endian unsigned
  kUint8,                  ///< 8-byte little-endian unsigned
  kDecimalnlShort,         ///< decimal text up to '\n' ("00"/"01" are False/True)
  kDecimalnlLong,          ///< decimal text up to '\n', optional trailing 'L'
  kLong1,                  ///< u8 length + little-endian two's-complement bytes
  kLong4,                  ///< i32 length + little-endian two's-complement bytes
  kStringnl,               ///< quoted, backslash-escaped bytes up to '\n'
  kStringnlNoescape,       ///< text up to '\n'
  kStringnlNoescapePair,   ///< two texts, each up to '\n'
  kString1,                ///< u8 length + bytes (Python 2 str)
  kString4,                ///< i32 length + bytes (Python 2 str)
  kBytes1,                 ///< u8 length + bytes
  kBytes4,                 ///< u32 length + bytes
  kBytes8,                 ///< u64 length + bytes
  kBytearray8,             ///< u64 length + bytes
  kUnicodestringnl,        ///< raw-unicode-escape text up to '\n'
  kUnicodestring1,         ///< u8 length + UTF-8
  kUnicodestring4,         ///< u32 length + UTF-8
  kUnicodestring8,         ///< u64 length + UTF-8
  kFloatnl,                ///< float text up to '\n'
  kFloat8,                 ///< 8-byte big-endian IEEE 754 double
};

/// Opcode bytes, named exactly as in pickletools so grep finds the spec.
enum class Op : std::uint8_t {
  MARK = 0x28, STOP = 0x2e, POP = 0x30, POP_MARK = 0x31, DUP = 0x32,
  FLOAT = 0x46, INT = 0x49, BININT = 0x4a, BININT1 = 0x4b, LONG = 0x4c,
  BININT2 = 0x4d, NONE = 0x4e, PERSID = 0x50, BINPERSID = 0x51, REDUCE = 0x52,
  STRING = 0x53, BINSTRING = 0x54, SHORT_BINSTRING = 0x55, UNICODE = 0x56,
  BINUNICODE = 0x58, APPEND = 0x61, BUILD = 0x62, GLOBAL = 0x63, DICT = 0x64,
  EMPTY_DICT = 0x7d, APPENDS = 0x65, GET = 0x67, BINGET = 0x68, INST = 0x69,
  LONG_BINGET = 0x6a, LIST = 0x6c, EMPTY_LIST = 0x5d, OBJ = 0x6f, PUT = 0x70,
  BINPUT = 0x71, LONG_BINPUT = 0x72, SETITEM = 0x73, TUPLE = 0x74,
  EMPTY_TUPLE = 0x29, SETITEMS = 0x75, BINFLOAT = 0x47,
  // protocol 2
  PROTO = 0x80, NEWOBJ = 0x81, EXT1 = 0x82, EXT2 = 0x83, EXT4 = 0x84,
  TUPLE1 = 0x85, TUPLE2 = 0x86, TUPLE3 = 0x87, NEWTRUE = 0x88, NEWFALSE = 0x89,
  LONG1 = 0x8a, LONG4 = 0x8b,
  // protocol 3
  BINBYTES = 0x42, SHORT_BINBYTES = 0x43,
  // protocol 4
  SHORT_BINUNICODE = 0x8c, BINUNICODE8 = 0x8d, BINBYTES8 = 0x8e, EMPTY_SET = 0x8f,
  ADDITEMS = 0x90, FROZENSET = 0x91, NEWOBJ_EX = 0x92, STACK_GLOBAL = 0x93,
  MEMOIZE = 0x94, FRAME = 0x95,
  // protocol 5
  BYTEARRAY8 = 0x96, NEXT_BUFFER = 0x97, READONLY_BUFFER = 0x98,
};

/// One row of the opcode table. The stack effect is the one pickletools
/// documents: `stack_before` items are consumed (a MARK among them at
/// position `mark_at`, or -1), `stack_after` items are produced.
struct OpcodeInfo {
  std::string_view name;     ///< pickletools name, e.g. "LONG_BINPUT"
  Op code;                   ///< the opcode byte
  ArgKind arg;               ///< argument encoding
  std::uint8_t proto;        ///< protocol that introduced the opcode
  std::uint8_t stack_before; ///< items consumed, the MARK and the slice above it counted as 2
  std::int8_t mark_at;       ///< index of the MARK among the consumed items, -1 if none
  std::uint8_t stack_after;  ///< items produced
  bool pushes_mark;          ///< true only for MARK
};

// Columns: name, byte, argument, protocol, before, mark_at, after, pushes_mark.
inline constexpr std::array<OpcodeInfo, 68> kOpcodes{{
    {"INT", Op::INT, ArgKind::kDecimalnlShort, 0, 0, -1, 1, false},
    {"BININT", Op::BININT, ArgKind::kInt4, 1, 0, -1, 1, false},
    {"BININT1", Op::BININT1, ArgKind::kUint1, 1, 0, -1, 1, false},
    {"BININT2", Op::BININT2, ArgKind::kUint2, 1, 0, -1, 1, false},
    {"LONG", Op::LONG, ArgKind::kDecimalnlLong, 0, 0, -1, 1, false},
    {"LONG1", Op::LONG1, ArgKind::kLong1, 2, 0, -1, 1, false},
    {"LONG4", Op::LONG4, ArgKind::kLong4, 2, 0, -1, 1, false},
    {"STRING", Op::STRING, ArgKind::kStringnl, 0, 0, -1, 1, false},
    {"BINSTRING", Op::BINSTRING, ArgKind::kString4, 1, 0, -1, 1, false},
    {"SHORT_BINSTRING", Op::SHORT_BINSTRING, ArgKind::kString1, 1, 0, -1, 1, false},
    {"BINBYTES", Op::BINBYTES, ArgKind::kBytes4, 3, 0, -1, 1, false},
    {"SHORT_BINBYTES", Op::SHORT_BINBYTES, ArgKind::kBytes1, 3, 0, -1, 1, false},
    {"BINBYTES8", Op::BINBYTES8, ArgKind::kBytes8, 4, 0, -1, 1, false},
    {"BYTEARRAY8", Op::BYTEARRAY8, ArgKind::kBytearray8, 5, 0, -1, 1, false},
    {"NEXT_BUFFER", Op::NEXT_BUFFER, ArgKind::kNone, 5, 0, -1, 1, false},
    {"READONLY_BUFFER", Op::READONLY_BUFFER, ArgKind::kNone, 5, 1, -1, 1, false},
    {"NONE", Op::NONE, ArgKind::kNone, 0, 0, -1, 1, false},
    {"NEWTRUE", Op::NEWTRUE, ArgKind::kNone, 2, 0, -1, 1, false},
    {"NEWFALSE", Op::NEWFALSE, ArgKind::kNone, 2, 0, -1, 1, false},
    {"UNICODE", Op::UNICODE, ArgKind::kUnicodestringnl, 0, 0, -1, 1, false},
    {"SHORT_BINUNICODE", Op::SHORT_BINUNICODE, ArgKind::kUnicodestring1, 4, 0, -1, 1, false},
    {"BINUNICODE", Op::BINUNICODE, ArgKind::kUnicodestring4, 1, 0, -1, 1, false},
    {"BINUNICODE8", Op::BINUNICODE8, ArgKind::kUnicodestring8, 4, 0, -1, 1, false},
    {"FLOAT", Op::FLOAT, ArgKind::kFloatnl, 0, 0, -1, 1, false},
    {"BINFLOAT", Op::BINFLOAT, ArgKind::kFloat8, 1, 0, -1, 1, false},
    {"EMPTY_LIST", Op::EMPTY_LIST, ArgKind::kNone, 1, 0, -1, 1, false},
    {"APPEND", Op::APPEND, ArgKind::kNone, 0, 2, -1, 1, false},
    {"APPENDS", Op::APPENDS, ArgKind::kNone, 1, 3, 1, 1, false},
    {"LIST", Op::LIST, ArgKind::kNone, 0, 2, 0, 1, false},
    {"EMPTY_TUPLE", Op::EMPTY_TUPLE, ArgKind::kNone, 1, 0, -1, 1, false},
    {"TUPLE", Op::TUPLE, ArgKind::kNone, 0, 2, 0, 1, false},
    {"TUPLE1", Op::TUPLE1, ArgKind::kNone, 2, 1, -1, 1, false},
    {"TUPLE2", Op::TUPLE2, ArgKind::kNone, 2, 2, -1, 1, false},
    {"TUPLE3", Op::TUPLE3, ArgKind::kNone, 2, 3, -1, 1, false},
    {"EMPTY_DICT", Op::EMPTY_DICT, ArgKind::kNone, 1, 0, -1, 1, false},
    {"DICT", Op::DICT, ArgKind::kNone, 0, 2, 0, 1, false},
    {"SETITEM", Op::SETITEM, ArgKind::kNone, 0, 3, -1, 1, false},
    {"SETITEMS", Op::SETITEMS, ArgKind::kNone, 1, 3, 1, 1, false},
    {"EMPTY_SET", Op::EMPTY_SET, ArgKind::kNone, 4, 0, -1, 1, false},
    {"ADDITEMS", Op::ADDITEMS, ArgKind::kNone, 4, 3, 1, 1, false},
    {"FROZENSET", Op::FROZENSET, ArgKind::kNone, 4, 2, 0, 1, false},
    {"POP", Op::POP, ArgKind::kNone, 0, 1, -1, 0, false},
    {"DUP", Op::DUP, ArgKind::kNone, 0, 1, -1, 2, false},
    {"MARK", Op::MARK, ArgKind::kNone, 0, 0, -1, 1, true},
    {"POP_MARK", Op::POP_MARK, ArgKind::kNone, 1, 2, 0, 0, false},
    {"GET", Op::GET, ArgKind::kDecimalnlShort, 0, 0, -1, 1, false},
    {"BINGET", Op::BINGET, ArgKind::kUint1, 1, 0, -1, 1, false},
    {"LONG_BINGET", Op::LONG_BINGET, ArgKind::kUint4, 1, 0, -1, 1, false},
    {"PUT", Op::PUT, ArgKind::kDecimalnlShort, 0, 0, -1, 0, false},
    {"BINPUT", Op::BINPUT, ArgKind::kUint1, 1, 0, -1, 0, false},
    {"LONG_BINPUT", Op::LONG_BINPUT, ArgKind::kUint4, 1, 0, -1, 0, false},
    {"MEMOIZE", Op::MEMOIZE, ArgKind::kNone, 4, 1, -1, 1, false},
    {"EXT1", Op::EXT1, ArgKind::kUint1, 2, 0, -1, 1, false},
    {"EXT2", Op::EXT2, ArgKind::kUint2, 2, 0, -1, 1, false},
    {"EXT4", Op::EXT4, ArgKind::kInt4, 2, 0, -1, 1, false},
    {"GLOBAL", Op::GLOBAL, ArgKind::kStringnlNoescapePair, 0, 0, -1, 1, false},
    {"STACK_GLOBAL", Op::STACK_GLOBAL, ArgKind::kNone, 4, 2, -1, 1, false},
    {"REDUCE", Op::REDUCE, ArgKind::kNone, 0, 2, -1, 1, false},
    {"BUILD", Op::BUILD, ArgKind::kNone, 0, 2, -1, 1, false},
    {"INST", Op::INST, ArgKind::kStringnlNoescapePair, 0, 2, 0, 1, false},
    {"OBJ", Op::OBJ, ArgKind::kNone, 1, 3, 0, 1, false},
    {"NEWOBJ", Op::NEWOBJ, ArgKind::kNone, 2, 2, -1, 1, false},
    {"NEWOBJ_EX", Op::NEWOBJ_EX, ArgKind::kNone, 4, 3, -1, 1, false},
    {"PROTO", Op::PROTO, ArgKind::kUint1, 2, 0, -1, 0, false},
    {"STOP", Op::STOP, ArgKind::kNone, 0, 1, -1, 0, false},
    {"FRAME", Op::FRAME, ArgKind::kUint8, 4, 0, -1, 0, false},
    {"PERSID", Op::PERSID, ArgKind::kStringnlNoescape, 0, 0, -1, 1, false},
    {"BINPERSID", Op::BINPERSID, ArgKind::kNone, 1, 1, -1, 1, false},
}};

/// The highest pickle protocol this library reads.
inline constexpr std::uint8_t kHighestProtocol = 5;

namespace detail {
/// byte -> row of kOpcodes, or -1; built at compile time and checked for duplicates.
constexpr std::array<std::int8_t, 256> make_opcode_index() {
  std::array<std::int8_t, 256> index{};
  for (auto& slot : index) slot = -1;
  for (std::size_t i = 0; i < kOpcodes.size(); ++i) {
    const auto byte = static_cast<std::uint8_t>(kOpcodes[i].code);
    if (index[byte] != -1) throw "duplicate opcode byte in kOpcodes";  // compile-time only
    index[byte] = static_cast<std::int8_t>(i);
  }
  return index;
}
inline constexpr std::array<std::int8_t, 256> kOpcodeIndex = make_opcode_index();
}  // namespace detail

/// The table row for an opcode byte, or nullptr when the byte is no opcode.
constexpr const OpcodeInfo* find_opcode(std::uint8_t byte) noexcept {
  const std::int8_t row = detail::kOpcodeIndex[byte];
  return row < 0 ? nullptr : &kOpcodes[static_cast<std::size_t>(row)];
}

}  // namespace maploc::pickle
