// json_subset.cpp - a small recursive-descent JSON reader (depth-bounded) and string quoting.
#include "torch/json_subset.h"

#include "support/utf8.h"

#include <cstdio>

namespace maploc::torch::json {
namespace {

struct Failure {
  std::string message;
  std::size_t offset;
};

class Parser {
 public:
  Parser(std::string_view s, std::size_t max_depth) : s_(s), max_depth_(max_depth) {}

  Value document() {
    Value v = value(0);
    skip_ws();
    if (pos_ != s_.size()) fail("unexpected text after the JSON value");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& message) { throw Failure{message, pos_}; }

  void skip_ws() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) ++pos_;
  }
  bool consume(char c) {
    skip_ws();
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!consume(c)) fail(std::string("expected '") + c + "'");
  }
  bool literal(std::string_view word) {
    if (s_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  Value value(std::size_t depth) {
    if (depth > max_depth_) fail("nesting deeper than " + std::to_string(max_depth_));
    skip_ws();
    if (pos_ >= s_.size()) fail("unexpected end of the JSON text");
    Value v;
    const char c = s_[pos_];
    if (c == '{') {
      ++pos_;
      v.type = Value::Type::kObject;
      if (consume('}')) return v;
      do {
        skip_ws();
        if (pos_ >= s_.size() || s_[pos_] != '"') fail("expected a string key");
        std::string key = string();
        expect(':');
        v.members.emplace_back(std::move(key), value(depth + 1));
      } while (consume(','));
      expect('}');
    } else if (c == '[') {
      ++pos_;
      v.type = Value::Type::kArray;
      if (consume(']')) return v;
      do {
        v.items.push_back(value(depth + 1));
      } while (consume(','));
      expect(']');
    } else if (c == '"') {
      v.type = Value::Type::kString;
      v.text = string();
    } else if (literal("true")) {
      v.type = Value::Type::kBool;
      v.boolean = true;
    } else if (literal("false")) {
      v.type = Value::Type::kBool;
    } else if (literal("null")) {
      v.type = Value::Type::kNull;
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      v.type = Value::Type::kNumber;
      const std::size_t start = pos_;
      while (pos_ < s_.size() && (std::string_view("+-.eE0123456789").find(s_[pos_]) != std::string_view::npos)) ++pos_;
      v.text = std::string(s_.substr(start, pos_ - start));
    } else {
      fail("unexpected character");
    }
    return v;
  }

  unsigned hex4() {
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

  static void utf8(std::string& out, unsigned cp) {
    std::uint8_t buf[4];
    out.append(reinterpret_cast<const char*>(buf), maploc::detail::encode_utf8(cp, buf));
  }


  std::string string() {
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
          utf8(out, cp);
          break;
        }
        default: fail("bad escape");
      }
    }
  }

  std::string_view s_;
  std::size_t max_depth_;
  std::size_t pos_ = 0;
};

}  // namespace

const Value* Value::find(std::string_view key) const {
  for (const auto& [k, v] : members) {
    if (k == key) return &v;
  }
  return nullptr;
}

std::optional<std::uint64_t> Value::as_u64() const {
  if (type != Type::kNumber || text.empty() || text.size() > 20) return std::nullopt;
  std::uint64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    const std::uint64_t d = static_cast<std::uint64_t>(c - '0');
    if (v > (UINT64_MAX - d) / 10) return std::nullopt;
    v = v * 10 + d;
  }
  return v;
}

std::pair<std::optional<Value>, ParseError> parse(std::string_view text, std::size_t max_depth) {
  try {
    Parser p(text, max_depth);
    return {p.document(), {}};
  } catch (const Failure& f) {
    return {std::nullopt, ParseError{f.message, f.offset}};
  }
}

std::string quote(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(c);
    } else if (u < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", u);
      out += buf;
    } else {
      out.push_back(c);
    }
  }
  out.push_back('"');
  return out;
}

}  // namespace maploc::torch::json
