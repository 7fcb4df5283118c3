// json_string.cpp - the one JSON string escaper (json_string.h).
#include "support/json_string.h"

#include <cstring>

namespace maploc::detail {
namespace {

constexpr char kHex[] = "0123456789abcdef";

// Printable ASCII with nothing to escape.
inline bool plain(unsigned char c) noexcept { return c >= 0x20 && c != '"' && c != '\\' && c < 0x80; }

}  // namespace

std::size_t utf8_sequence_length(std::string_view s, std::size_t i) noexcept {
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  if (c < 0x80) return 1;
  std::size_t n;
  unsigned char lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;  // overlong
    if (c == 0xED) hi = 0x9F;  // surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90;  // overlong
    if (c == 0xF4) hi = 0x8F;  // above U+10FFFF
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  if (b(i + 1) < lo || b(i + 1) > hi) return 0;
  for (std::size_t k = 2; k < n; ++k) {
    if ((b(i + k) & 0xC0) != 0x80) return 0;
  }
  return n;
}

std::size_t invalid_utf8_at(std::string_view s) noexcept {
  for (std::size_t i = 0; i < s.size();) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    const std::size_t n = utf8_sequence_length(s, i);
    if (n == 0) return i;
    i += n;
  }
  return std::string_view::npos;
}

void append_json_string(std::string& out, std::string_view s) {
  std::size_t i = 0;
  while (i < s.size() && plain(static_cast<unsigned char>(s[i]))) ++i;
  if (i == s.size()) {  // the common case: one append
    const std::size_t at = out.size();
    out.resize(at + s.size() + 2);
    char* p = out.data() + at;
    *p = '"';
    if (!s.empty()) std::memcpy(p + 1, s.data(), s.size());
    p[s.size() + 1] = '"';
    return;
  }
  out += '"';
  out.append(s.data(), i);
  while (i < s.size()) {
    std::size_t j = i;  // runs of printable ASCII go in one append
    while (j < s.size() && plain(static_cast<unsigned char>(s[j]))) ++j;
    out.append(s.data() + i, j - i);
    i = j;
    if (i == s.size()) break;
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      const std::size_t n = utf8_sequence_length(s, i);
      if (n == 0) {
        const char esc[6] = {'\\', '\\', 'x', kHex[c >> 4], kHex[c & 15], '\0'};
        out.append(esc, 5);
        ++i;
      } else {
        out.append(s.data() + i, n);
        i += n;
      }
      continue;
    }
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\t': out += "\\t"; break;
      case '\n': out += "\\n"; break;
      case '\f': out += "\\f"; break;
      case '\r': out += "\\r"; break;
      default: {
        const char esc[6] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 15]};
        out.append(esc, 6);
      }
    }
    ++i;
  }
  out += '"';
}

}  // namespace maploc::detail
