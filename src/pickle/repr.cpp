// repr.cpp - Python's repr() rules for the disassembler's argument column.
#include "repr.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdlib>

#include "text.h"

namespace maploc::pickle::detail {

namespace {
struct Range {
  std::uint32_t lo;
  std::uint32_t hi;
};
constexpr Range kPrintable[] = {
#include "printable_ranges.inc"
};

constexpr char kHex[] = "0123456789abcdef";

void append_hex(std::string& out, char prefix, std::uint32_t v, int digits) {
  out.push_back('\\');
  out.push_back(prefix);
  for (int k = digits - 1; k >= 0; --k) out.push_back(kHex[(v >> (4 * k)) & 0xF]);
}

// Python prefers single quotes unless the text has ' and no ".
char pick_quote(std::span<const std::uint8_t> s) {
  const bool has_single = std::find(s.begin(), s.end(), '\'') != s.end();
  const bool has_double = std::find(s.begin(), s.end(), '"') != s.end();
  return has_single && !has_double ? '"' : '\'';
}

bool escape_common(std::string& out, std::uint32_t c, char quote) {
  if (c == static_cast<std::uint32_t>(quote) || c == '\\') {
    out.push_back('\\');
    out.push_back(static_cast<char>(c));
  } else if (c == '\t') {
    out += "\\t";
  } else if (c == '\n') {
    out += "\\n";
  } else if (c == '\r') {
    out += "\\r";
  } else if (c < 0x20 || c == 0x7F) {
    append_hex(out, 'x', c, 2);
  } else if (c < 0x7F) {
    out.push_back(static_cast<char>(c));
  } else {
    return false;
  }
  return true;
}
}  // namespace

bool python_printable(std::uint32_t cp) noexcept {
  const auto* end = std::end(kPrintable);
  const auto* it = std::upper_bound(std::begin(kPrintable), end, cp,
                                    [](std::uint32_t v, const Range& r) { return v < r.lo; });
  if (it == std::begin(kPrintable)) return false;
  --it;
  return cp <= it->hi;
}

void repr_str(std::span<const std::uint8_t> utf8, std::string& out) {
  const char quote = pick_quote(utf8);
  out.push_back(quote);
  for (std::size_t i = 0; i < utf8.size();) {
    const std::size_t start = i;
    const std::uint32_t cp = next_code_point(utf8, i);
    if (escape_common(out, cp, quote)) continue;
    if (python_printable(cp)) {
      out.append(reinterpret_cast<const char*>(utf8.data() + start), i - start);
    } else if (cp <= 0xFF) {
      append_hex(out, 'x', cp, 2);
    } else if (cp <= 0xFFFF) {
      append_hex(out, 'u', cp, 4);
    } else {
      append_hex(out, 'U', cp, 8);
    }
  }
  out.push_back(quote);
}

void repr_bytes(std::span<const std::uint8_t> bytes, std::string& out) {
  const char quote = pick_quote(bytes);
  out.push_back('b');
  out.push_back(quote);
  for (std::uint8_t c : bytes)
    if (!escape_common(out, c, quote)) append_hex(out, 'x', c, 2);
  out.push_back(quote);
}

void repr_float(double v, std::string& out) {
  if (std::isnan(v)) {
    out += "nan";
    return;
  }
  if (std::isinf(v)) {
    out += v < 0 ? "-inf" : "inf";
    return;
  }
  // Shortest round-trip digits, then CPython's 'r' layout: exponent form
  // when the decimal point falls before -4 or after 16 digits.
  std::array<char, 64> buf{};
  const auto res = std::to_chars(buf.data(), buf.data() + buf.size(), v, std::chars_format::scientific);
  std::string_view sci(buf.data(), static_cast<std::size_t>(res.ptr - buf.data()));
  bool negative = false;
  if (!sci.empty() && sci.front() == '-') {
    negative = true;
    sci.remove_prefix(1);
  }
  const std::size_t e_pos = sci.find('e');
  std::string digits;
  for (char c : sci.substr(0, e_pos))
    if (c != '.') digits.push_back(c);
  int exp10 = std::atoi(std::string(sci.substr(e_pos + 1)).c_str());
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  const int decpt = exp10 + 1;
  if (negative) out.push_back('-');
  if (decpt <= -4 || decpt > 16) {
    out.push_back(digits[0]);
    if (digits.size() > 1) {
      out.push_back('.');
      out.append(digits, 1);
    }
    out.push_back('e');
    const int e = decpt - 1;
    out.push_back(e < 0 ? '-' : '+');
    const int mag = e < 0 ? -e : e;
    if (mag < 10) out.push_back('0');
    out += std::to_string(mag);
  } else if (decpt <= 0) {
    out += "0.";
    out.append(static_cast<std::size_t>(-decpt), '0');
    out += digits;
  } else if (static_cast<std::size_t>(decpt) >= digits.size()) {
    out += digits;
    out.append(static_cast<std::size_t>(decpt) - digits.size(), '0');
    out += ".0";
  } else {
    out.append(digits, 0, static_cast<std::size_t>(decpt));
    out.push_back('.');
    out.append(digits, static_cast<std::size_t>(decpt));
  }
}

}  // namespace maploc::pickle::detail
