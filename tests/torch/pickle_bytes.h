// pickle_bytes.h - hand-written pickle opcodes and a one-storage legacy stream around them, for the
// torch tests whose cases no torch writer makes (cycles, tensor state, completeness).
#pragma once

#include <cstdint>
#include <string>

#include "torch/torch_test_util.h"

namespace maploc::test {

inline std::string u32(std::uint32_t v) {
  std::string out(4, '\0');
  for (int i = 0; i < 4; ++i) out[static_cast<std::size_t>(i)] = static_cast<char>(v >> (8 * i));
  return out;
}
/// BINUNICODE of s.
inline std::string str(const std::string& s) { return "X" + u32(static_cast<std::uint32_t>(s.size())) + s; }
/// BINPUT i / BINGET i.
inline std::string put(int i) { return std::string("q") + static_cast<char>(i); }
inline std::string get(int i) { return std::string("h") + static_cast<char>(i); }

/// A legacy stream (pytorch-format.md §2.1) whose object pickle is `object` and whose one storage,
/// key '0', holds 4 float32 elements.
inline Buffer legacy(const std::string& object) {
  const std::string magic = "\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19.";
  const std::string version = "\x80\x02M\xe9\x03.";
  const std::string sys_info = "\x80\x02}.";
  const std::string keys = "\x80\x02]" + str("0") + "a.";
  const std::string data = std::string("\x04\0\0\0\0\0\0\0", 8) + std::string(16, '\x01');
  const std::string all = magic + version + sys_info + object + keys + data;
  return Buffer(all.begin(), all.end());
}

}  // namespace maploc::test
