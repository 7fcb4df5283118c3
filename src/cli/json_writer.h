// json_writer.h - the CLI's output: one large buffer for stdout, and a streaming JSON writer into it (internal).
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "maploc/error.h"

namespace maploc::cli {

/// The errno of the first write to stdout that failed (through OutBuffer or a flush of
/// stdio's stdout), 0 while none has.
int stdout_write_error() noexcept;
/// The error a failed write to stdout is reported as: kIoNoSpace (ENOSPC, EFBIG, EDQUOT) or
/// kIoWrite, "cannot write standard output: <strerror>" (exit 6, exit_codes.h).
Error stdout_write_failure(int err);

/// Everything a command prints on stdout, gathered in one buffer and written
/// with write(2). Text output (kStream) goes out whenever a megabyte has
/// gathered and on destruction, also when an error interrupts the command
/// (what was printed before it stays, as with stdio). JSON output (kWhole)
/// goes out only on finish(): an error leaves stdout empty, never half a document.
/// A failed write (disk full, I/O error, EPIPE where SIGPIPE is ignored) throws
/// stdout_write_failure() from finish() and spill(); the destructor records it
/// instead (stdout_write_error()), and nothing more is written after it.
class OutBuffer {
 public:
  enum class Mode { kStream, kWhole };
  explicit OutBuffer(Mode mode);
  ~OutBuffer();
  OutBuffer(const OutBuffer&) = delete;
  OutBuffer& operator=(const OutBuffer&) = delete;

  void append(std::string_view s) { buf_.append(s.data(), s.size()); spill(); }
  void append(char c) { buf_.push_back(c); }
  /// printf-style text, formatted straight into the buffer.
  [[gnu::format(printf, 2, 3)]] void printf(const char* format, ...);
  /// A std::ostream that appends here (for pickle::disassemble).
  std::ostream& stream();
  /// Writes everything gathered to stdout (after whatever stdio holds).
  void finish();

  std::string& text() { return buf_; }
  /// kStream: writes out what has gathered once it reaches a megabyte (for writers
  /// appending to text() directly).
  void spill() {
    if (mode_ == Mode::kStream && buf_.size() >= kSpill) finish();
  }
  /// Room for `bytes` more without regrowth (a whole document's copies and page faults saved),
  /// in huge pages where the kernel has them. A guess: more is still taken as it comes.
  void reserve(std::size_t bytes);

 private:
  static constexpr std::size_t kSpill = std::size_t{1} << 20;
  Mode mode_;
  std::string buf_;
  std::unique_ptr<std::streambuf> sbuf_;
  std::unique_ptr<std::ostream> stream_;
};

/// Writes one JSON document into a string as nlohmann::json's dump(2) prints
/// it: two-space indentation, ", " never, "key": value, keys of each object in
/// byte order (as nlohmann's std::map holds them; keys must come in that order,
/// and a key out of order or twice is a programming error: std::logic_error),
/// doubles as the shortest round-trip digits (std::to_chars) laid out as
/// nlohmann lays them out (its Grisu2 digits differ in a few cases in a
/// thousand: a digit more, or another last digit, reading back the same), NaN and
/// infinities as null, strings escaped as nlohmann escapes them, by the one
/// escaper of everything maploc writes (support/json_string.h: a byte that is
/// not well-formed UTF-8 is written as the text \xNN, never copied).
class JsonWriter {
 public:
  explicit JsonWriter(std::string& out, unsigned base_depth = 0) : out_(out), base_(base_depth) {}

  JsonWriter& begin_object();
  JsonWriter& end_object();
  JsonWriter& begin_array();
  JsonWriter& end_array();
  JsonWriter& key(std::string_view k);

  JsonWriter& value(std::string_view s);
  JsonWriter& value(const char* s) { return value(std::string_view(s)); }
  JsonWriter& value(const std::string& s) { return value(std::string_view(s)); }
  JsonWriter& value(bool b);
  JsonWriter& value(double d);
  template <std::integral T>
    requires(!std::same_as<T, bool>)
  JsonWriter& value(T v) {
    if constexpr (std::is_signed_v<T>) {
      return signed_value(static_cast<std::int64_t>(v));
    } else {
      return unsigned_value(static_cast<std::uint64_t>(v));
    }
  }
  JsonWriter& null();
  /// A value already written as JSON by a JsonWriter whose base depth was this one's depth.
  JsonWriter& raw_value(std::string_view json);

  /// key(k).value(v)
  template <class T>
  JsonWriter& field(std::string_view k, const T& v) {
    key(k);
    return value(v);
  }
  /// An array of strings or numbers.
  template <class T>
  JsonWriter& array(const std::vector<T>& items) {
    begin_array();
    for (const auto& i : items) value(i);
    return end_array();
  }
  template <class T>
  JsonWriter& field_array(std::string_view k, const std::vector<T>& items) {
    key(k);
    return array(items);
  }

  /// The JSON text of a string (quotes and escapes), appended to out: detail::append_json_string.
  static void append_string(std::string& out, std::string_view s);
  /// A double as nlohmann prints it ("0.5", "1e-05", "3.0", "null").
  static void append_double(std::string& out, double d);

 private:
  struct Level {
    bool object;
    std::size_t count = 0;
    std::string last_key;
  };
  JsonWriter& signed_value(std::int64_t v);
  JsonWriter& unsigned_value(std::uint64_t v);
  void before_value();
  void newline_indent(std::size_t depth, bool comma, std::string_view plain_key = {});
  void close(bool object, char bracket);

  std::string& out_;
  unsigned base_;
  std::vector<Level> levels_;
  bool after_key_ = false;
};

}  // namespace maploc::cli
