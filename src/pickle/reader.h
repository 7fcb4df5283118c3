// reader.h - bounds-checked reading of opcodes and their raw arguments (shared by machine and disassembler).
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <string>

#include "maploc/error.h"
#include "maploc/limits.h"
#include "maploc/pickle/opcodes.h"
#include "support/little_endian.h"

namespace maploc::pickle::detail {

/// An opcode's argument, decoded only as far as its ArgKind says; the
/// text forms (decimal, float, escaped strings) are interpreted by callers.
struct RawArg {
  std::uint64_t u = 0;                 ///< uint1/2/4/8; length of counted payloads
  std::int64_t i = 0;                  ///< int4
  double f = 0;                        ///< float8
  std::span<const std::uint8_t> data;  ///< counted payload, or the line of *nl kinds
  std::span<const std::uint8_t> data2; ///< second line of stringnl_noescape_pair
};

/// A cursor over one stream. Every read is checked against the bytes that
/// remain (subtraction form) and every declared length against
/// Limits::pickle_max_string_bytes before anything is viewed or allocated.
class Reader {
 public:
  Reader(std::span<const std::uint8_t> data, std::uint64_t start, const Limits& limits,
         const std::string& item)
      : data_(data), pos_(start), end_(data.size()), limits_(limits), item_(item) {}

  bool at_end() const noexcept { return pos_ >= data_.size(); }
  std::uint64_t pos() const noexcept { return pos_; }
  std::uint64_t op_offset() const noexcept { return op_offset_; }
  const OpcodeInfo* op() const noexcept { return op_; }
  std::uint8_t data_at(std::uint64_t offset) const noexcept { return data_[offset]; }

  /// Reads the next opcode byte; kPickleTruncated at end, kPickleUnknownOpcode for a non-opcode.
  const OpcodeInfo& next_opcode() {
    const std::uint8_t byte = opcode_byte();
    op_ = find_opcode(byte);
    if (op_ == nullptr) unknown_opcode(byte);
    return *op_;
  }

  /// The machine's half of next_opcode(): the byte, for its own dispatch table,
  /// which then names the opcode with set_op() (or calls unknown_opcode()).
  [[gnu::always_inline]] std::uint8_t opcode_byte() {
    op_offset_ = pos_;
    op_ = nullptr;
    return take(1)[0];
  }
  [[gnu::always_inline]] void set_op(const OpcodeInfo* op) noexcept { op_ = op; }

  [[noreturn, gnu::cold, gnu::noinline]] void unknown_opcode(std::uint8_t byte) const {
    static constexpr char kHex[] = "0123456789abcdef";
    std::string msg = "unknown opcode 0x";
    msg.push_back(kHex[byte >> 4]);
    msg.push_back(kHex[byte & 0xF]);
    fail(ErrorCode::kPickleUnknownOpcode, msg);
  }

  [[gnu::always_inline]] RawArg read_arg(ArgKind kind) {
    RawArg a;
    switch (kind) {
      case ArgKind::kNone: break;
      case ArgKind::kUint1: a.u = le(1); break;
      case ArgKind::kUint2: a.u = le(2); break;
      case ArgKind::kUint4: a.u = le(4); break;
      case ArgKind::kUint8: a.u = le(8); break;
      case ArgKind::kInt4: a.i = static_cast<std::int32_t>(static_cast<std::uint32_t>(le(4))); break;
      case ArgKind::kFloat8: {
        std::uint64_t bits = 0;
        for (auto b : take(8)) bits = (bits << 8) | b;  // big-endian
        std::memcpy(&a.f, &bits, 8);
        break;
      }
      case ArgKind::kLong1:
      case ArgKind::kString1:
      case ArgKind::kBytes1:
      case ArgKind::kUnicodestring1: counted(a, le(1)); break;
      case ArgKind::kBytes4:
      case ArgKind::kUnicodestring4: counted(a, le(4)); break;
      case ArgKind::kLong4:
      case ArgKind::kString4: {
        const auto n = static_cast<std::int32_t>(static_cast<std::uint32_t>(le(4)));
        if (n < 0) fail(ErrorCode::kPickleBadArgument, "negative byte count " + std::to_string(n));
        counted(a, static_cast<std::uint64_t>(n));
        break;
      }
      case ArgKind::kBytes8:
      case ArgKind::kBytearray8:
      case ArgKind::kUnicodestring8: counted(a, le(8)); break;
      case ArgKind::kDecimalnlShort:
      case ArgKind::kDecimalnlLong:
      case ArgKind::kStringnl:
      case ArgKind::kStringnlNoescape:
      case ArgKind::kUnicodestringnl:
      case ArgKind::kFloatnl: a.data = line(); break;
      case ArgKind::kStringnlNoescapePair:
        a.data = line();
        a.data2 = line();
        break;
    }
    return a;
  }

  /// FRAME: the next `len` bytes form a frame; no opcode may straddle its end.
  void enter_frame(std::uint64_t len) {
    if (frame_end_ != 0 && pos_ < frame_end_)
      fail(ErrorCode::kPickleBadArgument, "FRAME begins before the end of the current frame");
    if (len > data_.size() - pos_)
      fail(ErrorCode::kPickleTruncated, "FRAME of " + std::to_string(len) + " bytes but only " +
                                            std::to_string(data_.size() - pos_) + " remain");
    frame_end_ = pos_ + len;
    if (check_frames_) end_ = frame_end_;
  }
  void set_check_frames(bool on) noexcept { check_frames_ = on; }

  [[noreturn]] void fail(ErrorCode code, const std::string& message) const {
    std::string msg;
    if (op_ != nullptr) {
      msg.append(op_->name);
      msg.push_back(' ');
    }
    msg.append(message);
    throw Error(code, Stage::kPickle, std::move(msg), op_offset_, item_);
  }

  const Limits& limits() const noexcept { return limits_; }

 private:
  /// One comparison against end_ (the frame's end inside a frame, else the
  /// stream's): frame bookkeeping and errors are in the cold path.
  std::span<const std::uint8_t> take(std::uint64_t n) {
    if (pos_ > end_ || n > end_ - pos_) [[unlikely]] leave_frame(n);
    auto s = data_.subspan(pos_, n);
    pos_ += n;
    return s;
  }

  /// take() past end_: a frame read to its end is left (reading goes on
  /// outside it); an opcode straddling a frame's end, or the stream's, fails.
  [[gnu::noinline]] void leave_frame(std::uint64_t n) {
    if (check_frames_ && frame_end_ != 0) {
      if (pos_ < frame_end_) fail(ErrorCode::kPickleBadArgument, "opcode straddles the end of its FRAME");
      frame_end_ = 0;  // frame consumed; reading continues outside it
      end_ = data_.size();
    }
    if (pos_ > data_.size() || n > data_.size() - pos_) truncated(n);
  }

  // take()'s failure, out of line so that take() itself inlines into every opcode's read.
  [[noreturn, gnu::cold, gnu::noinline]] void truncated(std::uint64_t n) const {
    fail(ErrorCode::kPickleTruncated,
         op_ == nullptr ? std::string("stream ends before STOP")
                        : "needs " + std::to_string(n) + " bytes but only " +
                              std::to_string(data_.size() - pos_) + " remain");
  }

  std::uint64_t le(int n) {
    const std::uint8_t* p = take(static_cast<std::uint64_t>(n)).data();
    switch (n) {
      case 1: return p[0];
      case 2: return maploc::detail::load_u16(p);
      case 4: return maploc::detail::load_u32(p);
      default: return maploc::detail::load_u64(p);
    }
  }

  void counted(RawArg& a, std::uint64_t n) {
    a.u = n;
    if (n > limits_.pickle_max_string_bytes)
      fail(ErrorCode::kPickleLimitStringBytes,
           "length " + std::to_string(n) + " exceeds the string limit " +
               std::to_string(limits_.pickle_max_string_bytes) +
               " (raise Limits::pickle_max_string_bytes)");
    a.data = take(n);
  }

  std::span<const std::uint8_t> line() {
    const std::uint64_t avail = data_.size() - pos_;
    const std::uint64_t scan = avail < limits_.pickle_max_string_bytes + 1
                                   ? avail
                                   : limits_.pickle_max_string_bytes + 1;
    const void* nl = std::memchr(data_.data() + pos_, '\n', scan);
    if (nl == nullptr) {
      if (scan < avail)
        fail(ErrorCode::kPickleLimitStringBytes,
             "text argument longer than " + std::to_string(limits_.pickle_max_string_bytes) +
                 " bytes (raise Limits::pickle_max_string_bytes)");
      fail(ErrorCode::kPickleTruncated, "no newline ends the text argument");
    }
    const auto len = static_cast<std::uint64_t>(static_cast<const std::uint8_t*>(nl) -
                                                (data_.data() + pos_));
    auto s = take(len + 1);
    return s.first(len);
  }

  std::span<const std::uint8_t> data_;
  std::uint64_t pos_;
  std::uint64_t end_;  ///< what take() may read up to: frame_end_ inside a checked frame, else data_.size()
  const Limits& limits_;
  const std::string& item_;
  std::uint64_t op_offset_ = 0;
  const OpcodeInfo* op_ = nullptr;
  std::uint64_t frame_end_ = 0;
  bool check_frames_ = true;
};

}  // namespace maploc::pickle::detail
