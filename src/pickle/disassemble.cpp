// disassemble.cpp - pickletools.dis, byte for byte, driven by the shared opcode table.
#include "maploc/pickle/disassemble.h"

#include <algorithm>
#include <charconv>
#include <optional>
#include <ostream>
#include <sstream>
#include <unordered_set>
#include <vector>

#include "reader.h"
#include "repr.h"
#include "text.h"
#include "support/memory_guard.h"
#include "support/seeded_hash.h"

namespace maploc::pickle {

namespace {

using detail::ByteSpan;
using detail::ByteVec;

std::string_view view_of(ByteSpan s) { return {reinterpret_cast<const char*>(s.data()), s.size()}; }

void append_decimal(std::string& out, std::uint64_t v) {
  char digits[24];
  out.append(digits, static_cast<std::size_t>(std::to_chars(digits, digits + sizeof digits, v).ptr - digits));
}

/// The argument column: Python's repr() of what pickletools' reader returns.
class ArgFormatter {
 public:
  ArgFormatter(detail::Reader& in, std::uint64_t max_int_digits) : in_(in), max_int_digits_(max_int_digits) {}

  /// Also returns the integer value for memo bookkeeping (GET/PUT family).
  /// `out` is cleared first; one string serves every opcode.
  void format(ArgKind kind, const detail::RawArg& a, std::optional<std::int64_t>& as_int, std::string& out) {
    out.clear();
    switch (kind) {
      case ArgKind::kNone: break;
      case ArgKind::kUint1:
      case ArgKind::kUint2:
      case ArgKind::kUint4:
      case ArgKind::kUint8:
        append_decimal(out, a.u);
        if (a.u <= static_cast<std::uint64_t>(INT64_MAX)) as_int = static_cast<std::int64_t>(a.u);
        break;
      case ArgKind::kInt4:
        out = std::to_string(a.i);
        as_int = a.i;
        break;
      case ArgKind::kDecimalnlShort:
        if (view_of(a.data) == "00" || view_of(a.data) == "01") {
          as_int = view_of(a.data) == "01" ? 1 : 0;
          out = *as_int ? "True" : "False";
          break;
        }
        out = decimal(view_of(a.data), as_int);
        break;
      case ArgKind::kDecimalnlLong: {
        std::string_view t = view_of(a.data);
        if (!t.empty() && t.back() == 'L') t.remove_suffix(1);
        out = decimal(t, as_int);
        break;
      }
      case ArgKind::kLong1:
      case ArgKind::kLong4: out = detail::twos_to_decimal(a.data, max_int_digits_); break;
      case ArgKind::kStringnl: {
        ByteSpan d = a.data;
        if (!d.empty() && (d.front() == '"' || d.front() == '\'')) {
          if (d.back() != d.front())
            in_.fail(ErrorCode::kPickleBadArgument, "string quote not found at both ends");
          d = d.size() >= 2 ? d.subspan(1, d.size() - 2) : ByteSpan{};
        } else {
          in_.fail(ErrorCode::kPickleBadArgument, "no string quotes around the argument");
        }
        detail::repr_str(ascii_unescaped(d), out);
        break;
      }
      case ArgKind::kStringnlNoescape: detail::repr_str(ascii_unescaped(a.data), out); break;
      case ArgKind::kStringnlNoescapePair: {
        ByteVec both = ascii_unescaped(a.data);
        both.push_back(' ');
        const ByteVec second = ascii_unescaped(a.data2);
        both.insert(both.end(), second.begin(), second.end());
        detail::repr_str(both, out);
        break;
      }
      case ArgKind::kString1:
      case ArgKind::kString4: {
        ByteVec utf8;
        detail::latin1_to_utf8(a.data, utf8);
        detail::repr_str(utf8, out);
        break;
      }
      case ArgKind::kBytes1:
      case ArgKind::kBytes4:
      case ArgKind::kBytes8: detail::repr_bytes(a.data, out); break;
      case ArgKind::kBytearray8:
        out = "bytearray(";
        detail::repr_bytes(a.data, out);
        out.push_back(')');
        break;
      case ArgKind::kUnicodestringnl: {
        ByteVec utf8;
        if (const char* err = detail::raw_unicode_escape_decode(a.data, utf8))
          in_.fail(ErrorCode::kPickleBadArgument, err);
        detail::repr_str(utf8, out);
        break;
      }
      case ArgKind::kUnicodestring1:
      case ArgKind::kUnicodestring4:
      case ArgKind::kUnicodestring8:
        if (!detail::valid_utf8_surrogatepass(a.data))
          in_.fail(ErrorCode::kPickleBadArgument, "text is not valid UTF-8");
        detail::repr_str(a.data, out);
        break;
      case ArgKind::kFloatnl: {
        double f = 0;
        if (const char* err = detail::parse_float(view_of(a.data), f))
          in_.fail(ErrorCode::kPickleBadArgument, err);
        detail::repr_float(f, out);
        break;
      }
      case ArgKind::kFloat8: detail::repr_float(a.f, out); break;
    }
  }

 private:
  std::string decimal(std::string_view text, std::optional<std::int64_t>& as_int) {
    detail::ParsedInt p;
    if (const char* err = detail::parse_decimal(text, p)) in_.fail(ErrorCode::kPickleBadArgument, err);
    if (p.fits) {
      as_int = p.small;
      return std::to_string(p.small);
    }
    return detail::twos_to_decimal(p.big, detail::kMaxDecimalDigits);  // parse_decimal capped it
  }

  // pickletools decodes these with escape_decode(...).decode("ascii").
  ByteVec ascii_unescaped(ByteSpan d) {
    ByteVec out;
    if (const char* err = detail::escape_decode(d, out)) in_.fail(ErrorCode::kPickleBadArgument, err);
    if (!detail::is_ascii(out)) in_.fail(ErrorCode::kPickleBadArgument, "text argument is not ASCII");
    return out;
  }

  detail::Reader& in_;
  std::uint64_t max_int_digits_;
};

void opcode_column(Op code, std::string& line) {
  const auto byte = static_cast<std::uint8_t>(code);
  if (byte >= 0x20 && byte < 0x7F) {
    line.push_back(static_cast<char>(byte));
    line.append(3, ' ');
  } else {
    static constexpr char kHex[] = "0123456789abcdef";
    line += "\\x";
    line.push_back(kHex[byte >> 4]);
    line.push_back(kHex[byte & 0xF]);
  }
}

/// pickletools' crude stack emulation, where only the MARKs matter: the
/// stack's height and the heights at which its MARKs sit (a vector<bool>
/// grown item by item was a fifth of disassembling).
class MarkStack {
 public:
  bool empty() const noexcept { return size_ == 0; }
  std::size_t size() const noexcept { return size_; }
  bool top_is_mark() const noexcept { return !marks_.empty() && marks_.back() + 1 == size_; }
  /// Pops down to and including the topmost MARK (everything when there is none).
  void pop_through_mark() {
    size_ = marks_.empty() ? 0 : marks_.back();
    if (!marks_.empty()) marks_.pop_back();
  }
  void pop(std::size_t n) {
    size_ -= n;
    while (!marks_.empty() && marks_.back() >= size_) marks_.pop_back();
  }
  void push_mark() { marks_.push_back(size_++); }
  void push(std::size_t n) { size_ += n; }

 private:
  std::size_t size_ = 0;
  std::vector<std::size_t> marks_;
};

/// The memo ids PUT so far: a bitmap for ids below the stream's length (each
/// PUT takes at least two bytes, so that bounds it), a hash set for others.
class MemoIds {
 public:
  explicit MemoIds(std::size_t stream_bytes) : dense_limit_(stream_bytes) {}
  bool contains(std::int64_t id) const {
    if (id >= 0 && static_cast<std::uint64_t>(id) < dense_limit_)
      return static_cast<std::size_t>(id) < dense_.size() && dense_[static_cast<std::size_t>(id)];
    return sparse_.count(id) != 0;
  }
  void insert(std::int64_t id) {
    ++count_;
    if (id >= 0 && static_cast<std::uint64_t>(id) < dense_limit_) {
      const auto i = static_cast<std::size_t>(id);
      if (i >= dense_.size()) dense_.resize(std::max<std::size_t>(i + 1, dense_.size() * 2), false);
      dense_[i] = true;
      return;
    }
    sparse_.insert(id);
  }
  std::size_t size() const noexcept { return count_; }

 private:
  std::uint64_t dense_limit_;
  std::vector<bool> dense_;
  std::unordered_set<std::int64_t, maploc::detail::SeededWordHash> sparse_;
  std::size_t count_ = 0;
};

}  // namespace

namespace {
constexpr std::size_t kFlushBytes = 64 << 10;

std::uint64_t disassemble_stream(std::span<const std::uint8_t> stream, std::ostream& out, const DisOptions& options) {
  if (options.start_offset > stream.size())
    throw Error(ErrorCode::kInvalidArgument, Stage::kPickle, "start offset is past the end",
                options.start_offset, options.stream_name);
  const bool text = options.write_text;
  const Limits limits{};
  detail::Reader in(stream, options.start_offset, limits, options.stream_name);
  in.set_check_frames(false);  // pickletools reads FRAME's argument and nothing more
  ArgFormatter fmt(in, options.max_int_digits);

  constexpr unsigned kMaxIndentDepth = 100;
  MarkStack stack;
  std::vector<std::uint64_t> markstack;
  MemoIds memo(stream.size());
  int maxproto = -1;
  const std::string indent(options.indent, ' ');
  // Lines gather in one buffer written out in large pieces, and before any
  // error propagates (the lines before a failure are printed, as pickletools does).
  std::string buffer, arg, markmsg;
  buffer.reserve(kFlushBytes + 4096);
  const auto flush = [&] {
    out.write(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    buffer.clear();
  };
  try {
    for (;;) {
      const OpcodeInfo& info = in.next_opcode();
      const std::uint64_t pos = in.op_offset();
      const detail::RawArg raw = in.read_arg(info.arg);
      std::optional<std::int64_t> as_int;
      fmt.format(info.arg, raw, as_int, arg);

      const auto depth = static_cast<unsigned>(markstack.size());
      if (text) {
        char digits[24];
        const auto end = std::to_chars(digits, digits + sizeof digits, pos).ptr;
        const auto width = static_cast<std::size_t>(end - digits);
        if (width < 5) buffer.append(5 - width, ' ');
        buffer.append(digits, width);
        buffer += ": ";
        opcode_column(info.code, buffer);
        buffer.push_back(' ');
        // pickletools indents by the MARK depth, so n MARKs would print O(n^2)
        // bytes (a 200 KB pickle of MARKs: 80 GB). The indentation stops growing
        // at kMaxIndentDepth, far deeper than any real pickle nests its MARKs.
        for (unsigned k = 0; k < std::min(depth, kMaxIndentDepth); ++k) buffer += indent;
        buffer += info.name;
      }
      maxproto = std::max(maxproto, static_cast<int>(info.proto));

      std::size_t numtopop = info.stack_before;
      markmsg.clear();
      std::optional<std::pair<ErrorCode, std::string>> error;
      const bool pop_takes_mark = info.code == Op::POP && stack.top_is_mark();
      if (info.mark_at >= 0 || pop_takes_mark) {
        if (!markstack.empty()) {
          markmsg = "(MARK at ";
          append_decimal(markmsg, markstack.back());
          markmsg.push_back(')');
          markstack.pop_back();
          stack.pop_through_mark();
          numtopop = info.mark_at >= 0 ? static_cast<std::size_t>(info.mark_at) : 0;
        } else {
          markmsg = "no MARK exists on stack";
          error.emplace(ErrorCode::kPickleMarkNotFound, markmsg);
        }
      }

      const bool put = info.code == Op::PUT || info.code == Op::BINPUT ||
                       info.code == Op::LONG_BINPUT || info.code == Op::MEMOIZE;
      const bool get = info.code == Op::GET || info.code == Op::BINGET || info.code == Op::LONG_BINGET;
      if (put) {
        std::int64_t idx = as_int.value_or(-1);
        if (info.code == Op::MEMOIZE) {
          idx = static_cast<std::int64_t>(memo.size());
          markmsg = "(as " + std::to_string(idx) + ")";
        }
        if (memo.contains(idx))
          error.emplace(ErrorCode::kPickleBadArgument, "memo key " + arg + " already defined");
        else if (stack.empty())
          error.emplace(ErrorCode::kPickleStackUnderflow, "stack is empty -- can't store into memo");
        else if (stack.top_is_mark())
          error.emplace(ErrorCode::kPickleBadArgument, "can't store markobject in the memo");
        else
          memo.insert(idx);
      } else if (get) {
        if (!as_int || !memo.contains(*as_int))
          error.emplace(ErrorCode::kPickleMemoMissing, "memo key " + arg + " has never been stored into");
      }

      if (text && (info.arg != ArgKind::kNone || !markmsg.empty())) {
        if (info.name.size() < 10) buffer.append(10 - info.name.size(), ' ');
        if (info.arg != ArgKind::kNone) {
          buffer.push_back(' ');
          buffer += arg;
        }
        if (!markmsg.empty()) {
          buffer.push_back(' ');
          buffer += markmsg;
        }
      }
      if (text) buffer.push_back('\n');
      if (options.on_opcode) {
        options.on_opcode({pos, static_cast<std::uint8_t>(info.code), info.name,
                           info.arg != ArgKind::kNone ? std::string_view(arg) : std::string_view(), markmsg, depth});
      }
      if (error) in.fail(error->first, error->second);

      if (stack.size() < numtopop)
        in.fail(ErrorCode::kPickleStackUnderflow,
                "tries to pop " + std::to_string(numtopop) + " items from stack with only " +
                    std::to_string(stack.size()) + " items");
      stack.pop(numtopop);
      if (info.pushes_mark) {
        markstack.push_back(pos);
        stack.push_mark();
      } else {
        stack.push(info.stack_after);
      }
      if (info.code == Op::STOP) break;
      if (buffer.size() >= kFlushBytes) flush();
    }
  } catch (...) {
    flush();
    throw;
  }
  flush();
  if (text) out << "highest protocol among opcodes = " << maxproto << '\n';
  if (!stack.empty())
    in.fail(ErrorCode::kPickleBadArgument, "stack not empty after STOP");
  return in.pos();
}

}  // namespace

std::uint64_t disassemble(std::span<const std::uint8_t> stream, std::ostream& out, const DisOptions& options) {
  return maploc::detail::guard_memory(Stage::kPickle, options.stream_name,
                                      [&] { return disassemble_stream(stream, out, options); });
}

std::string disassemble(std::span<const std::uint8_t> stream, const DisOptions& options) {
  std::ostringstream out;
  disassemble(stream, out, options);
  return out.str();
}

}  // namespace maploc::pickle
