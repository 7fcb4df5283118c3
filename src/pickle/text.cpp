// text.cpp - decoders for pickle argument text (the rules of CPython's codecs and int()/float()).
#include "text.h"

#include "support/utf8.h"

#include <bit>
#include <charconv>
#include <cstring>
#include <string>

namespace maploc::pickle::detail {

bool is_ascii(ByteSpan s) noexcept {
  std::size_t i = 0;
  // Eight bytes at a time: the common case (keys, module names) is ASCII.
  for (; s.size() - i >= 8; i += 8) {
    std::uint64_t word;
    std::memcpy(&word, s.data() + i, 8);
    if (word & 0x8080808080808080ull) return false;
  }
  for (; i < s.size(); ++i)
    if (s[i] & 0x80) return false;
  return true;
}

bool valid_utf8_surrogatepass(ByteSpan s) noexcept {
  std::size_t i = 0;
  const std::size_t n = s.size();
  while (i < n) {
    if (n - i >= 8) {
      std::uint64_t word;
      std::memcpy(&word, s.data() + i, 8);
      if ((word & 0x8080808080808080ull) == 0) {
        i += 8;
        continue;
      }
    }
    const std::uint8_t c = s[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    std::size_t len;
    std::uint32_t cp;
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
      cp = c & 0x1Fu;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      cp = c & 0x0Fu;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      cp = c & 0x07u;
    } else {
      return false;
    }
    if (n - i < len) return false;
    for (std::size_t k = 1; k < len; ++k) {
      const std::uint8_t cc = s[i + k];
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3Fu);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF))) return false;
    i += len;
  }
  return true;
}

void append_utf8(ByteVec& out, std::uint32_t cp) {
  std::uint8_t buf[4];
  out.insert(out.end(), buf, buf + maploc::detail::encode_utf8(cp, buf));
}

std::uint32_t next_code_point(ByteSpan s, std::size_t& i) noexcept {
  const std::uint8_t c = s[i];
  if (c < 0x80) {
    ++i;
    return c;
  }
  const std::size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
  std::uint32_t cp = c & (len == 2 ? 0x1Fu : len == 3 ? 0x0Fu : 0x07u);
  for (std::size_t k = 1; k < len && i + k < s.size(); ++k) cp = (cp << 6) | (s[i + k] & 0x3Fu);
  i += len;
  return cp;
}

void latin1_to_utf8(ByteSpan in, ByteVec& out) {
  out.reserve(out.size() + in.size());
  for (std::uint8_t c : in) append_utf8(out, c);
}

bool utf8_to_latin1(ByteSpan in, ByteVec& out) {
  out.reserve(out.size() + in.size());
  for (std::size_t i = 0; i < in.size();) {
    const std::uint32_t cp = next_code_point(in, i);
    if (cp > 0xFF) return false;
    out.push_back(static_cast<std::uint8_t>(cp));
  }
  return true;
}

namespace {
int hex_digit(std::uint8_t c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}
}  // namespace

const char* escape_decode(ByteSpan in, ByteVec& out) {
  out.reserve(out.size() + in.size());
  std::size_t i = 0;
  while (i < in.size()) {
    const std::uint8_t c = in[i++];
    if (c != '\\') {
      out.push_back(c);
      continue;
    }
    if (i == in.size()) return "trailing \\ in string";
    const std::uint8_t e = in[i++];
    switch (e) {
      case '\n': break;  // line continuation
      case '\\': out.push_back('\\'); break;
      case '\'': out.push_back('\''); break;
      case '"': out.push_back('"'); break;
      case 'b': out.push_back('\b'); break;
      case 'f': out.push_back('\f'); break;
      case 't': out.push_back('\t'); break;
      case 'n': out.push_back('\n'); break;
      case 'r': out.push_back('\r'); break;
      case 'v': out.push_back('\v'); break;
      case 'a': out.push_back('\a'); break;
      case 'x': {
        if (in.size() - i < 2 || hex_digit(in[i]) < 0 || hex_digit(in[i + 1]) < 0)
          return "invalid \\x escape";
        out.push_back(static_cast<std::uint8_t>(hex_digit(in[i]) * 16 + hex_digit(in[i + 1])));
        i += 2;
        break;
      }
      default:
        if (e >= '0' && e <= '7') {
          unsigned v = e - '0';
          for (int k = 0; k < 2 && i < in.size() && in[i] >= '0' && in[i] <= '7'; ++k)
            v = v * 8 + (in[i++] - '0');
          out.push_back(static_cast<std::uint8_t>(v & 0xFF));  // CPython truncates \400-\777
        } else {
          out.push_back('\\');  // unknown escapes are kept verbatim
          --i;
        }
    }
  }
  return nullptr;
}

const char* raw_unicode_escape_decode(ByteSpan in, ByteVec& out) {
  out.reserve(out.size() + in.size());
  std::size_t i = 0;
  while (i < in.size()) {
    const std::uint8_t c = in[i++];
    if (c != '\\' || i == in.size()) {
      append_utf8(out, c);  // bytes are latin-1 code points
      continue;
    }
    const std::uint8_t e = in[i++];
    const std::size_t count = e == 'u' ? 4 : e == 'U' ? 8 : 0;
    if (count == 0) {
      out.push_back('\\');
      append_utf8(out, e);
      continue;
    }
    if (in.size() - i < count) return "truncated \\uXXXX escape";
    std::uint32_t cp = 0;
    for (std::size_t k = 0; k < count; ++k) {
      const int d = hex_digit(in[i++]);
      if (d < 0) return "truncated \\uXXXX escape";
      cp = (cp << 4) | static_cast<std::uint32_t>(d);
    }
    if (cp > 0x10FFFF) return "\\Uxxxxxxxx out of range";
    append_utf8(out, cp);
  }
  return nullptr;
}

namespace {
bool is_space(char c) noexcept {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}
std::string_view strip(std::string_view t) noexcept {
  while (!t.empty() && is_space(t.front())) t.remove_prefix(1);
  while (!t.empty() && is_space(t.back())) t.remove_suffix(1);
  return t;
}

// Magnitude in 32-bit limbs, least significant first.
using Limbs = std::vector<std::uint32_t>;

void negate_twos(ByteVec& b) noexcept {
  unsigned carry = 1;
  for (auto& byte : b) {
    const unsigned v = static_cast<std::uint8_t>(~byte) + carry;
    byte = static_cast<std::uint8_t>(v);
    carry = v >> 8;
  }
}

// Drops redundant sign-extension bytes.
void minimise_twos(ByteVec& b) noexcept {
  while (b.size() >= 2) {
    const std::uint8_t top = b.back();
    const std::uint8_t next = b[b.size() - 2];
    if ((top == 0x00 && !(next & 0x80)) || (top == 0xFF && (next & 0x80)))
      b.pop_back();
    else
      break;
  }
  if (b.size() == 1 && b[0] == 0) b.clear();
}
}  // namespace

const char* parse_decimal(std::string_view text, ParsedInt& out) {
  text = strip(text);
  bool negative = false;
  if (!text.empty() && (text.front() == '+' || text.front() == '-')) {
    negative = text.front() == '-';
    text.remove_prefix(1);
  }
  if (text.empty()) return "empty integer literal";
  if (text.size() > kMaxDecimalDigits) return "integer literal longer than 4300 digits";
  for (char c : text)
    if (c < '0' || c > '9') return "invalid integer literal";
  std::uint64_t mag = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), mag);
  if (ec == std::errc{} && ptr == text.data() + text.size()) {
    if (!negative && mag <= static_cast<std::uint64_t>(INT64_MAX)) {
      out.fits = true;
      out.small = static_cast<std::int64_t>(mag);
      return nullptr;
    }
    if (negative && mag <= static_cast<std::uint64_t>(INT64_MAX) + 1) {
      out.fits = true;
      out.small = mag == static_cast<std::uint64_t>(INT64_MAX) + 1
                      ? INT64_MIN
                      : -static_cast<std::int64_t>(mag);
      return nullptr;
    }
  }
  // Schoolbook base conversion; bounded by kMaxDecimalDigits.
  Limbs limbs;
  for (char c : text) {
    std::uint64_t carry = static_cast<std::uint64_t>(c - '0');
    for (auto& limb : limbs) {
      const std::uint64_t v = std::uint64_t{limb} * 10 + carry;
      limb = static_cast<std::uint32_t>(v);
      carry = v >> 32;
    }
    if (carry) limbs.push_back(static_cast<std::uint32_t>(carry));
  }
  ByteVec bytes;
  bytes.reserve(limbs.size() * 4 + 1);
  for (auto limb : limbs)
    for (int k = 0; k < 4; ++k) bytes.push_back(static_cast<std::uint8_t>(limb >> (8 * k)));
  bytes.push_back(0);  // room for the sign
  if (negative) negate_twos(bytes);
  minimise_twos(bytes);
  out.fits = false;
  out.big = std::move(bytes);
  return nullptr;
}

const char* parse_float(std::string_view text, double& out) {
  text = strip(text);
  std::string buf;
  buf.reserve(text.size());
  // Python accepts '+' and '_' between digits; from_chars accepts neither.
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '_') {
      const bool ok = i > 0 && i + 1 < text.size() && text[i - 1] >= '0' && text[i - 1] <= '9' &&
                      text[i + 1] >= '0' && text[i + 1] <= '9';
      if (!ok) return "invalid float literal";
      continue;
    }
    if (c == '+' && i == 0) continue;
    buf.push_back(c);
  }
  if (buf.empty() || buf.front() == '+' || (buf.size() > 1 && buf[0] == '-' && buf[1] == '+'))
    return "invalid float literal";
  const char* first = buf.data();
  const char* last = buf.data() + buf.size();
  const auto [ptr, ec] = std::from_chars(first, last, out);
  if (ptr != last) return "invalid float literal";
  if (ec == std::errc::result_out_of_range) {
    // Python rounds like strtod: overflow to +-inf, underflow to +-0.
    out = std::strtod(buf.c_str(), nullptr);
    return nullptr;
  }
  if (ec != std::errc{}) return "invalid float literal";
  // from_chars accepts "nan(...)"; Python does not.
  if (buf.find('(') != std::string::npos) return "invalid float literal";
  return nullptr;
}

bool twos_to_int64(ByteSpan le, std::int64_t& out) noexcept {
  if (le.empty()) {
    out = 0;
    return true;
  }
  const bool negative = le.back() & 0x80;
  const std::uint8_t fill = negative ? 0xFF : 0x00;
  for (std::size_t k = 8; k < le.size(); ++k)
    if (le[k] != fill) return false;
  std::uint64_t v = negative ? ~std::uint64_t{0} : 0;
  const std::size_t n = le.size() < 8 ? le.size() : 8;
  for (std::size_t k = 0; k < n; ++k) {
    v &= ~(std::uint64_t{0xFF} << (8 * k));
    v |= std::uint64_t{le[k]} << (8 * k);
  }
  // Bit 63 must agree with the sign of the whole number.
  if (le.size() > 8 && (((v >> 63) != 0) != negative)) return false;
  out = static_cast<std::int64_t>(v);
  return true;
}

ByteVec int64_to_twos(std::int64_t v) {
  ByteVec b(8);
  const auto u = static_cast<std::uint64_t>(v);
  for (int k = 0; k < 8; ++k) b[k] = static_cast<std::uint8_t>(u >> (8 * k));
  minimise_twos(b);
  return b;
}

std::string twos_to_decimal(ByteSpan le, std::uint64_t max_digits) {
  if (le.empty()) return "0";
  ByteVec mag(le.begin(), le.end());
  const bool negative = mag.back() & 0x80;
  if (negative) negate_twos(mag);
  while (!mag.empty() && mag.back() == 0) mag.pop_back();
  const std::uint64_t bits = mag.empty() ? 0 : 8 * (mag.size() - 1) + std::bit_width(unsigned{mag.back()});
  // 10^d >= 2^bits - 1 needs d >= bits x log10(2): below this, at most max_digits digits.
  if (static_cast<double>(bits) > static_cast<double>(max_digits) * 3.321928094887362) {
    static constexpr char kHex[] = "0123456789abcdef";
    std::string out = negative ? "-0x" : "0x";
    out.reserve(out.size() + 2 * mag.size());
    bool lead = true;
    for (std::size_t k = mag.size(); k-- > 0;) {
      for (int shift : {4, 0}) {
        const unsigned nib = (mag[k] >> shift) & 0xf;
        if (lead && nib == 0) continue;
        lead = false;
        out.push_back(kHex[nib]);
      }
    }
    return out;
  }
  Limbs limbs((mag.size() + 3) / 4, 0);
  for (std::size_t k = 0; k < mag.size(); ++k)
    limbs[k / 4] |= std::uint32_t{mag[k]} << (8 * (k % 4));
  while (!limbs.empty() && limbs.back() == 0) limbs.pop_back();
  std::string digits;
  // Repeated division by 10^9, most significant limb first.
  while (!limbs.empty()) {
    std::uint64_t rem = 0;
    for (std::size_t k = limbs.size(); k-- > 0;) {
      const std::uint64_t cur = (rem << 32) | limbs[k];
      limbs[k] = static_cast<std::uint32_t>(cur / 1000000000u);
      rem = cur % 1000000000u;
    }
    while (!limbs.empty() && limbs.back() == 0) limbs.pop_back();
    for (int d = 0; d < 9; ++d) {
      digits.push_back(static_cast<char>('0' + rem % 10));
      rem /= 10;
      if (limbs.empty() && rem == 0) break;
    }
  }
  if (digits.empty()) digits.push_back('0');
  if (negative) digits.push_back('-');
  return std::string(digits.rbegin(), digits.rend());
}

}  // namespace maploc::pickle::detail
