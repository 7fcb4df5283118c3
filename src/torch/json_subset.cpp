// json_subset.cpp - a small pull JSON reader (depth-bounded, no tree) and string quoting.
#include "json_subset.h"

#include "support/utf8.h"

#include <cstdio>

namespace maploc::torch::json {

void Reader::skip_ws() {
  while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) ++pos_;
}

bool Reader::consume(char c) {
  skip_ws();
  if (pos_ < s_.size() && s_[pos_] == c) {
    ++pos_;
    return true;
  }
  return false;
}

void Reader::expect(char c) {
  if (!consume(c)) fail(std::string("expected '") + c + "'");
}

void Reader::enter() {
  if (++depth_ > max_depth_) fail("nesting deeper than " + std::to_string(max_depth_));
}

std::uint64_t Reader::offset() {
  skip_ws();
  return pos_;
}

Reader::Type Reader::peek() {
  skip_ws();
  if (pos_ >= s_.size()) fail("unexpected end of the JSON text");
  const std::string_view rest = s_.substr(pos_);
  switch (s_[pos_]) {
    case '{': return Type::kObject;
    case '[': return Type::kArray;
    case '"': return Type::kString;
    case 't':
      if (rest.substr(0, 4) == "true") return Type::kBool;
      break;
    case 'f':
      if (rest.substr(0, 5) == "false") return Type::kBool;
      break;
    case 'n':
      if (rest.substr(0, 4) == "null") return Type::kNull;
      break;
    default:
      if (s_[pos_] == '-' || (s_[pos_] >= '0' && s_[pos_] <= '9')) return Type::kNumber;
  }
  fail("unexpected character");
}

std::string_view Reader::number() {
  if (peek() != Type::kNumber) fail("expected a number");
  const std::size_t start = pos_;
  while (pos_ < s_.size() && (std::string_view("+-.eE0123456789").find(s_[pos_]) != std::string_view::npos)) ++pos_;
  return s_.substr(start, pos_ - start);
}

void Reader::skip() {
  switch (peek()) {
    case Type::kObject: object([this](std::string&&) { skip(); }); return;
    case Type::kArray: array([this] { skip(); }); return;
    case Type::kString: (void)string(); return;
    case Type::kNumber: (void)number(); return;
    case Type::kBool: pos_ += s_[pos_] == 't' ? 4 : 5; return;
    case Type::kNull: pos_ += 4; return;
  }
}

bool Reader::boolean() {
  if (peek() != Type::kBool) fail("expected true or false");
  const bool v = s_[pos_] == 't';
  pos_ += v ? 4 : 5;
  return v;
}

void Reader::end() {
  skip_ws();
  if (pos_ != s_.size()) fail("unexpected text after the JSON value");
}

unsigned Reader::hex4() {
  if (s_.size() - pos_ < 4) fail("truncated \\u escape");
  unsigned v = 0;
  for (int i = 0; i < 4; ++i) {
    const char h = s_[pos_++];
    v <<= 4;
    if (h >= '0' && h <= '9') v |= static_cast<unsigned>(h - '0');
    else if (h >= 'a' && h <= 'f') v |= static_cast<unsigned>(h - 'a' + 10);
    else if (h >= 'A' && h <= 'F') v |= static_cast<unsigned>(h - 'A' + 10);
    else fail("bad \\u escape");
  }
  return v;
}

std::string Reader::string() {
  if (peek() != Type::kString) fail("expected a string");
  ++pos_;  // opening quote
  std::string out;
  while (true) {
    if (pos_ >= s_.size()) fail("unterminated string");
    const char c = s_[pos_++];
    if (c == '"') return out;
    if (static_cast<unsigned char>(c) < 0x20) fail("control character in a string");
    if (c != '\\') {
      out.push_back(c);
      continue;
    }
    if (pos_ >= s_.size()) fail("unterminated escape");
    const char e = s_[pos_++];
    switch (e) {
      case '"': out.push_back('"'); break;
      case '\\': out.push_back('\\'); break;
      case '/': out.push_back('/'); break;
      case 'b': out.push_back('\b'); break;
      case 'f': out.push_back('\f'); break;
      case 'n': out.push_back('\n'); break;
      case 'r': out.push_back('\r'); break;
      case 't': out.push_back('\t'); break;
      case 'u': {
        unsigned cp = hex4();
        if (cp >= 0xD800 && cp < 0xDC00 && s_.substr(pos_, 2) == "\\u") {
          pos_ += 2;
          const unsigned lo = hex4();
          if (lo < 0xDC00 || lo > 0xDFFF) fail("unpaired surrogate escape");
          cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        }
        std::uint8_t buf[4];
        out.append(reinterpret_cast<const char*>(buf), maploc::detail::encode_utf8(cp, buf));
        break;
      }
      default: fail("bad escape");
    }
  }
}

namespace {
Value build(Reader& r, std::size_t& budget, std::size_t max_values) {
  if (budget == 0) r.fail("more than " + std::to_string(max_values) + " JSON values");
  --budget;
  Value v;
  v.type = r.peek();
  switch (v.type) {
    case Reader::Type::kObject:
      r.object([&](std::string&& key) { v.members.emplace_back(std::move(key), build(r, budget, max_values)); });
      break;
    case Reader::Type::kArray: r.array([&] { v.items.push_back(build(r, budget, max_values)); }); break;
    case Reader::Type::kString: v.text = r.string(); break;
    case Reader::Type::kNumber: v.text = std::string(r.number()); break;
    case Reader::Type::kBool: v.boolean = r.boolean(); break;
    case Reader::Type::kNull: r.skip(); break;
  }
  return v;
}
}  // namespace

const Value* Value::find(std::string_view key) const {
  for (const auto& m : members) {
    if (m.first == key) return &m.second;
  }
  return nullptr;
}

std::pair<std::optional<Value>, ParseError> parse(std::string_view text, std::size_t max_depth,
                                                  std::size_t max_values) {
  try {
    Reader r(text, max_depth);
    std::size_t budget = max_values;
    Value v = build(r, budget, max_values);
    r.end();
    return {std::move(v), {}};
  } catch (const Failure& f) {
    return {std::nullopt, ParseError{f.message, f.offset}};
  }
}

std::optional<std::uint64_t> as_u64(std::string_view text) {
  if (text.empty() || text.size() > 20) return std::nullopt;
  std::uint64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    const std::uint64_t d = static_cast<std::uint64_t>(c - '0');
    if (v > (UINT64_MAX - d) / 10) return std::nullopt;
    v = v * 10 + d;
  }
  return v;
}

}  // namespace maploc::torch::json
