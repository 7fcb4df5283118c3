// format.h - how the CLI writes sizes, rates and times for people (internal).
#pragma once

#include <cstdint>
#include <string>

namespace maploc::cli {

/// "512 B", "1.5 KiB", "3.2 GiB".
std::string human_bytes(std::uint64_t n);

/// "2.31 GB/s" for n bytes in `seconds` (decimal GB, as bandwidth is quoted).
std::string human_rate(std::uint64_t n, double seconds);

}  // namespace maploc::cli
