// json_subset.h - the JSON a safetensors header needs: a bounded pull reader (internal; strings are
// written by support/json_string.h, the one escaper).
// A pull reader, not a tree: a 40 MB header of 20 million tiny tokens made 20
// million 88-byte nodes (1.7 GB) and an uncaught bad_alloc (issue 15). The
// caller reads the values it wants and skips the rest, which costs nothing.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace maploc::torch::json {

/// Thrown by Reader on malformed JSON; the caller turns it into its own error code.
struct Failure {
  std::string message;
  std::uint64_t offset = 0;
};

/// Reads one JSON document (RFC 8259) front to back. Each value is consumed
/// by exactly one call: string(), number(), object(), array() or skip().
class Reader {
 public:
  enum class Type : std::uint8_t { kNull, kBool, kNumber, kString, kArray, kObject };

  /// Containers may nest at most max_depth deep.
  explicit Reader(std::string_view text, std::size_t max_depth = 64) : s_(text), max_depth_(max_depth) {}

  /// The type of the next value (fails at the end of the text or on a bad character).
  Type peek();
  /// Offset of the next non-blank character.
  std::uint64_t offset();
  /// A string value, unescaped.
  std::string string();
  /// A number's literal text (a view of the document).
  std::string_view number();
  /// Any value, checked but not kept.
  void skip();
  /// true or false.
  bool boolean();
  /// An object: on_member(key) is called with the reader at each member's value and must consume it.
  template <typename OnMember>
  void object(OnMember on_member);
  /// An array: on_item() is called with the reader at each element and must consume it.
  template <typename OnItem>
  void array(OnItem on_item);
  /// After the top value: only blanks may follow.
  void end();

  [[noreturn]] void fail(const std::string& message) { throw Failure{message, pos_}; }

 private:
  void skip_ws();
  bool consume(char c);
  void expect(char c);
  void enter();
  unsigned hex4();

  std::string_view s_;
  std::size_t max_depth_;
  std::size_t depth_ = 0;
  std::size_t pos_ = 0;
};

template <typename OnMember>
void Reader::object(OnMember on_member) {
  if (peek() != Type::kObject) fail("expected an object");
  enter();
  ++pos_;
  if (!consume('}')) {
    do {
      if (peek() != Type::kString) fail("expected a string key");
      std::string key = string();
      expect(':');
      on_member(std::move(key));
    } while (consume(','));
    expect('}');
  }
  --depth_;
}

template <typename OnItem>
void Reader::array(OnItem on_item) {
  if (peek() != Type::kArray) fail("expected an array");
  enter();
  ++pos_;
  if (!consume(']')) {
    do {
      on_item();
    } while (consume(','));
    expect(']');
  }
  --depth_;
}

/// A non-negative integer literal that fits uint64, else nullopt.
std::optional<std::uint64_t> as_u64(std::string_view literal);

struct Member;

/// A parsed JSON value, for small documents of bounded size (parse() caps the
/// values it builds; large file-borne JSON is read with Reader instead).
struct Value {
  using Type = Reader::Type;
  Type type = Type::kNull;
  bool boolean = false;
  std::string text;              ///< string contents (unescaped) or number literal
  std::vector<Value> items;      ///< array elements
  std::vector<Member> members;   ///< object members in file order

  /// The first member under key, or nullptr.
  const Value* find(std::string_view key) const;
  /// A non-negative integer literal that fits uint64, else nullopt.
  std::optional<std::uint64_t> as_u64() const { return json::as_u64(text); }
};

/// One object member (not a std::pair: clang 14 + libstdc++ reject the incomplete type).
struct Member {
  Member(std::string key, Value value) : first(std::move(key)), second(std::move(value)) {}
  std::string first;
  Value second;
};

/// Why parse() failed and where.
struct ParseError {
  std::string message;
  std::uint64_t offset = 0;
};

/// Parses one JSON document into a tree of at most max_values values (each
/// about 90 bytes: a token flood fails here instead of exhausting memory).
std::pair<std::optional<Value>, ParseError> parse(std::string_view text, std::size_t max_depth = 64,
                                                  std::size_t max_values = std::size_t{1} << 20);

}  // namespace maploc::torch::json
