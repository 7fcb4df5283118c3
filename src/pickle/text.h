// text.h - decoders for pickle argument text: UTF-8, latin-1, escapes, decimal and float literals.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace maploc::pickle::detail {

using ByteSpan = std::span<const std::uint8_t>;
using ByteVec = std::vector<std::uint8_t>;

/// UTF-8 as Python decodes it with 'surrogatepass' (lone surrogates allowed,
/// overlong forms and code points past U+10FFFF rejected).
bool valid_utf8_surrogatepass(ByteSpan s) noexcept;
/// True when every byte is < 0x80.
bool is_ascii(ByteSpan s) noexcept;
/// Appends code point cp in UTF-8 (surrogates encoded like 'surrogatepass').
void append_utf8(ByteVec& out, std::uint32_t cp);
/// Decodes one code point of valid UTF-8 at s[i], advancing i.
std::uint32_t next_code_point(ByteSpan s, std::size_t& i) noexcept;
/// latin-1 bytes -> UTF-8.
void latin1_to_utf8(ByteSpan in, ByteVec& out);
/// UTF-8 -> latin-1; false when a code point is above U+00FF.
bool utf8_to_latin1(ByteSpan in, ByteVec& out);

/// Python's codecs.escape_decode (the STRING opcode's escapes). Returns an
/// error message, or nullptr on success.
const char* escape_decode(ByteSpan in, ByteVec& out);
/// Python's 'raw-unicode-escape' decoding (the UNICODE opcode) into UTF-8.
const char* raw_unicode_escape_decode(ByteSpan in, ByteVec& out);

/// An integer literal: int64 when it fits, else minimal little-endian two's complement.
struct ParsedInt {
  bool fits = true;
  std::int64_t small = 0;
  ByteVec big;
};
/// Most decimal digits accepted, as CPython's default int_max_str_digits
/// (longer literals make decimal conversion quadratic work).
inline constexpr std::size_t kMaxDecimalDigits = 4300;
/// Parses "[ws][+-]digits[ws]". Returns an error message or nullptr.
const char* parse_decimal(std::string_view text, ParsedInt& out);
/// Parses a Python float literal ("1.5", "-inf", "nan", "1e300"). Returns an error message or nullptr.
const char* parse_float(std::string_view text, double& out);

/// Little-endian two's complement -> int64, false when it does not fit.
bool twos_to_int64(ByteSpan le, std::int64_t& out) noexcept;
/// Little-endian two's complement -> decimal text, or, when the magnitude has
/// more bits than max_digits decimal digits can hold (bit length above
/// max_digits x log2(10)), Python's hex() form ("0x1f", "-0x1f"): decimal
/// conversion is quadratic, hex is linear (Limits::pickle_max_int_digits).
std::string twos_to_decimal(ByteSpan le, std::uint64_t max_digits);
/// int64 -> minimal little-endian two's complement (0 -> empty).
ByteVec int64_to_twos(std::int64_t v);

}  // namespace maploc::pickle::detail
