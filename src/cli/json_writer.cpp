// json_writer.cpp - stdout gathered in one buffer; JSON written into it as nlohmann's dump(2) would.
#include "json_writer.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

#include "maploc/error.h"
#include "support/huge_chunks.h"
#include "support/json_string.h"

namespace maploc::cli {
namespace {

// The std::streambuf behind OutBuffer::stream().
class AppendBuf : public std::streambuf {
 public:
  explicit AppendBuf(OutBuffer& out) : out_(out) {}

 protected:
  int_type overflow(int_type ch) override {
    if (ch != traits_type::eof()) out_.append(static_cast<char>(ch));
    return ch;
  }
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    out_.append(std::string_view(s, static_cast<std::size_t>(n)));
    return n;
  }

 private:
  OutBuffer& out_;
};

// The errno of the first failed write to stdout (0: none). After it nothing more is written.
int g_stdout_error = 0;

// Writes everything or returns the errno that stopped it (0 when all went out).
int write_all(const char* p, std::size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(STDOUT_FILENO, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return errno;
    if (w == 0) return EIO;
    p += w;
    n -= static_cast<std::size_t>(w);
  }
  return 0;
}

// nlohmann's exponent: sign always, at least two digits.
void append_exponent(std::string& out, int e) {
  out += e < 0 ? '-' : '+';
  e = std::abs(e);
  if (e < 10) out += '0';
  out += std::to_string(e);
}

}  // namespace

// ---- OutBuffer -------------------------------------------------------------------------

OutBuffer::OutBuffer(Mode mode) : mode_(mode) { buf_.reserve(std::size_t{1} << 20); }

void OutBuffer::reserve(std::size_t bytes) {
  constexpr std::size_t kMost = std::size_t{1} << 30;  // a guess never reserves more than this
  const std::size_t want = buf_.size() + std::min(bytes, kMost);
  if (want <= buf_.capacity()) return;
  buf_.reserve(want);
  maploc::detail::prefer_huge_pages(buf_.data() + buf_.size(), buf_.capacity() - buf_.size());
}

OutBuffer::~OutBuffer() {
  if (mode_ != Mode::kStream) return;
  try {
    finish();
  } catch (const Error&) {
    // Recorded in g_stdout_error: the CLI's exit path reports it (stdout_write_error()).
  }
}

void OutBuffer::printf(const char* format, ...) {
  const std::size_t at = buf_.size();
  std::va_list ap;
  va_start(ap, format);
  std::va_list again;
  va_copy(again, ap);
  buf_.resize(at + 256);
  const int n = std::vsnprintf(buf_.data() + at, 256, format, ap);
  va_end(ap);
  if (n < 0) {
    buf_.resize(at);
    va_end(again);
    return;
  }
  if (n >= 256) {
    buf_.resize(at + static_cast<std::size_t>(n) + 1);
    std::vsnprintf(buf_.data() + at, static_cast<std::size_t>(n) + 1, format, again);
  }
  va_end(again);
  buf_.resize(at + static_cast<std::size_t>(n));
  spill();
}

std::ostream& OutBuffer::stream() {
  if (!stream_) {
    sbuf_ = std::make_unique<AppendBuf>(*this);
    stream_ = std::make_unique<std::ostream>(sbuf_.get());
  }
  return *stream_;
}

void OutBuffer::finish() {
  if (std::fflush(stdout) != 0 && g_stdout_error == 0) g_stdout_error = errno != 0 ? errno : EIO;
  if (g_stdout_error == 0) g_stdout_error = write_all(buf_.data(), buf_.size());
  buf_.clear();
  if (g_stdout_error != 0) throw stdout_write_failure(g_stdout_error);
}

int stdout_write_error() noexcept { return g_stdout_error; }

Error stdout_write_failure(int err) {
  return Error(err == ENOSPC || err == EFBIG || err == EDQUOT ? ErrorCode::kIoNoSpace : ErrorCode::kIoWrite, Stage::kIo,
               std::string("cannot write standard output: ") + std::strerror(err) +
                   (err == EPIPE ? " (the reader of the pipe went away)" : ""));
}

// ---- JsonWriter ------------------------------------------------------------------------

namespace {
// Printable ASCII with nothing to escape: written as is between quotes.
bool plain_text(std::string_view s) {
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c == '"' || c == '\\' || c >= 0x80) return false;
  }
  return true;
}
}  // namespace

// A separator, a newline and the indentation (and a plain key), gathered in one
// small buffer and appended once: a value in an array or a key costs one append.
void JsonWriter::newline_indent(std::size_t depth, bool comma, std::string_view plain_key) {
  char buf[192];
  const std::size_t blanks = 2 * depth;
  const std::size_t need = 2 + blanks + (plain_key.empty() ? 0 : plain_key.size() + 4);
  if (need > sizeof buf) {
    if (comma) out_ += ',';
    out_ += '\n';
    out_.append(blanks, ' ');
    if (!plain_key.empty()) {
      append_string(out_, plain_key);
      out_ += ": ";
    }
    return;
  }
  char* p = buf;
  if (comma) *p++ = ',';
  *p++ = '\n';
  std::memset(p, ' ', blanks);
  p += blanks;
  if (!plain_key.empty()) {
    *p++ = '"';
    std::memcpy(p, plain_key.data(), plain_key.size());
    p += plain_key.size();
    std::memcpy(p, "\": ", 3);
    p += 3;
  }
  out_.append(buf, static_cast<std::size_t>(p - buf));
}

void JsonWriter::before_value() {
  if (levels_.empty()) return;
  Level& top = levels_.back();
  if (top.object) {
    if (!after_key_) throw std::logic_error("JsonWriter: a value in an object needs its key first");
    after_key_ = false;
    return;
  }
  newline_indent(base_ + levels_.size(), top.count++ > 0);
}

JsonWriter& JsonWriter::key(std::string_view k) {
  if (levels_.empty() || !levels_.back().object || after_key_) {
    throw std::logic_error("JsonWriter: a key outside an object, or two keys in a row");
  }
  Level& top = levels_.back();
  if (top.count > 0 && !(top.last_key < k)) {
    throw std::logic_error("JsonWriter: key '" + std::string(k) + "' after '" + top.last_key +
                           "': keys go in byte order, each once");
  }
  const bool comma = top.count++ > 0;
  if (!k.empty() && plain_text(k)) {
    newline_indent(base_ + levels_.size(), comma, k);
  } else {
    newline_indent(base_ + levels_.size(), comma);
    append_string(out_, k);
    out_ += ": ";
  }
  top.last_key.assign(k);
  after_key_ = true;
  return *this;
}

JsonWriter& JsonWriter::begin_object() {
  before_value();
  out_ += '{';
  levels_.push_back({true, 0, {}});
  return *this;
}

JsonWriter& JsonWriter::begin_array() {
  before_value();
  out_ += '[';
  levels_.push_back({false, 0, {}});
  return *this;
}

void JsonWriter::close(bool object, char bracket) {
  if (levels_.empty() || levels_.back().object != object || after_key_) {
    throw std::logic_error("JsonWriter: end_object/end_array does not match what is open");
  }
  const bool empty = levels_.back().count == 0;
  levels_.pop_back();
  if (!empty) newline_indent(base_ + levels_.size(), false);
  out_ += bracket;
}

JsonWriter& JsonWriter::end_object() {
  close(true, '}');
  return *this;
}

JsonWriter& JsonWriter::end_array() {
  close(false, ']');
  return *this;
}

JsonWriter& JsonWriter::value(std::string_view s) {
  before_value();
  append_string(out_, s);
  return *this;
}

JsonWriter& JsonWriter::value(bool b) {
  before_value();
  out_ += b ? "true" : "false";
  return *this;
}

JsonWriter& JsonWriter::value(double d) {
  before_value();
  append_double(out_, d);
  return *this;
}

JsonWriter& JsonWriter::signed_value(std::int64_t v) {
  before_value();
  char buf[24];
  out_.append(buf, static_cast<std::size_t>(std::to_chars(buf, buf + sizeof buf, v).ptr - buf));
  return *this;
}

JsonWriter& JsonWriter::unsigned_value(std::uint64_t v) {
  before_value();
  char buf[24];
  out_.append(buf, static_cast<std::size_t>(std::to_chars(buf, buf + sizeof buf, v).ptr - buf));
  return *this;
}

JsonWriter& JsonWriter::null() {
  before_value();
  out_ += "null";
  return *this;
}

JsonWriter& JsonWriter::raw_value(std::string_view json) {
  before_value();
  out_ += json;
  return *this;
}

void JsonWriter::append_string(std::string& out, std::string_view s) { detail::append_json_string(out, s); }

void JsonWriter::append_double(std::string& out, double d) {
  if (!std::isfinite(d)) {
    out += "null";
    return;
  }
  if (std::signbit(d)) {
    out += '-';
    d = -d;
  }
  if (d == 0) {
    out += "0.0";
    return;
  }
  // Shortest round-trip digits and their exponent, then nlohmann's layout
  // (format_buffer: fixed notation for decimal exponents -4 < n <= 15).
  char sci[32];
  const auto res = std::to_chars(sci, sci + sizeof sci, d, std::chars_format::scientific);
  const std::string_view text(sci, static_cast<std::size_t>(res.ptr - sci));
  const std::size_t e_at = text.find('e');
  std::string digits;
  for (std::size_t k = 0; k < e_at; ++k) {
    if (text[k] != '.') digits += text[k];
  }
  int exp10 = 0;
  std::from_chars(text.data() + e_at + (text[e_at + 1] == '+' ? 2 : 1), text.data() + text.size(), exp10);
  const int k = static_cast<int>(digits.size());
  const int n = exp10 + 1;  // the decimal point's position after the first n digits
  constexpr int kMinExp = -4;
  constexpr int kMaxExp = 15;
  if (k <= n && n <= kMaxExp) {
    out += digits;
    out.append(static_cast<std::size_t>(n - k), '0');
    out += ".0";
  } else if (0 < n && n <= kMaxExp) {
    out.append(digits, 0, static_cast<std::size_t>(n));
    out += '.';
    out.append(digits, static_cast<std::size_t>(n));
  } else if (kMinExp < n && n <= 0) {
    out += "0.";
    out.append(static_cast<std::size_t>(-n), '0');
    out += digits;
  } else {
    out += digits[0];
    if (k > 1) {
      out += '.';
      out.append(digits, 1);
    }
    out += 'e';
    append_exponent(out, n - 1);
  }
}

}  // namespace maploc::cli
