// json_string.h - the one JSON string escaper of everything maploc writes (internal; CLI output,
// safetensors headers, set indexes), and the UTF-8 checks it rests on.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace maploc::detail {

/// Length of the well-formed UTF-8 sequence (RFC 3629: no overlong forms, no surrogates,
/// nothing above U+10FFFF) that starts at s[i], or 0 when the byte there starts none.
std::size_t utf8_sequence_length(std::string_view s, std::size_t i) noexcept;

/// Offset of the first byte of s that is not part of well-formed UTF-8, or npos when s is valid.
std::size_t invalid_utf8_at(std::string_view s) noexcept;

/// Appends s to out as a JSON string literal (RFC 8259), quotes included, always valid UTF-8:
///  - '"' and '\' as \" and \\; the control characters U+0000-U+001F as \b \t \n \f \r or
///    \u00XX (lower-case hex), as nlohmann::json's dump() writes them; DEL and every other
///    character as itself (well-formed multi-byte UTF-8 is copied, not \u-escaped);
///  - a byte that is not part of well-formed UTF-8 is never copied: it becomes the four
///    characters \xNN (lower-case hex; in the JSON text "\\xNN"), so names that differ in such
///    bytes stay different, and the original bytes can be read back from that spelling.
///    (A string that really contains the text \xNN reads back the same: docs/cli.md.)
/// Callers that must not change a name (the safetensors header) check invalid_utf8_at first.
void append_json_string(std::string& out, std::string_view s);

/// append_json_string into a new string.
inline std::string json_string(std::string_view s) {
  std::string out;
  append_json_string(out, s);
  return out;
}

}  // namespace maploc::detail
