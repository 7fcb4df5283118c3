// json_subset.h - the JSON a safetensors header needs: a bounded reader and string escaping (internal).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace maploc::torch::json {

struct Member;

/// One parsed JSON value. Numbers keep their literal text.
struct Value {
  enum class Type : std::uint8_t { kNull, kBool, kNumber, kString, kArray, kObject };
  Type type = Type::kNull;
  bool boolean = false;
  std::string text;                                     ///< string contents (unescaped) or number literal
  std::vector<Value> items;                             ///< array elements
  std::vector<Member> members;                          ///< object members in file order

  /// The member under key, or nullptr.
  const Value* find(std::string_view key) const;
  /// A non-negative integer literal that fits uint64, else nullopt.
  std::optional<std::uint64_t> as_u64() const;
};

/// One object member. Not a std::pair: std::pair<std::string, Value> inside Value
/// is an incomplete type for clang with libstdc++ (the fuzz build is clang).
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

/// Parses one JSON document (RFC 8259; trailing whitespace allowed) nested at
/// most max_depth deep. Returns the error instead of throwing so the caller
/// can raise its own code.
std::pair<std::optional<Value>, ParseError> parse(std::string_view text, std::size_t max_depth = 64);

/// A JSON string literal (with quotes) for UTF-8 text.
std::string quote(std::string_view text);

}  // namespace maploc::torch::json
