// format.cpp - sizes and rates for people.
#include "format.h"

#include <cstdio>

namespace maploc::cli {

std::string human_bytes(std::uint64_t n) {
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(n);
  int unit = 0;
  while (v >= 1024 && unit < 4) {
    v /= 1024;
    ++unit;
  }
  char buf[32];
  if (unit == 0) {
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(n));
  } else {
    std::snprintf(buf, sizeof buf, "%.1f %s", v, kUnits[unit]);
  }
  return buf;
}

std::string human_rate(std::uint64_t n, double seconds) {
  char buf[32];
  if (seconds <= 0) return "-";
  std::snprintf(buf, sizeof buf, "%.2f GB/s", static_cast<double>(n) / seconds / 1e9);
  return buf;
}

}  // namespace maploc::cli
