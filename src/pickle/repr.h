// repr.h - Python's repr() of str, bytes, int and float, as pickletools prints arguments.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace maploc::pickle::detail {

/// Python's str.isprintable() for one code point (Unicode table of the Python that generated it).
bool python_printable(std::uint32_t cp) noexcept;
/// repr() of a str given as UTF-8 (surrogatepass).
void repr_str(std::span<const std::uint8_t> utf8, std::string& out);
/// repr() of bytes: b'...'.
void repr_bytes(std::span<const std::uint8_t> bytes, std::string& out);
/// repr() of a float: shortest round-trip digits in Python's layout.
void repr_float(double v, std::string& out);

}  // namespace maploc::pickle::detail
