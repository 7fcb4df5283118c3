// proc_stats.h - clock and /proc counters shared by the benchmark runners (maploc's and LibTorch's).
#pragma once

#include <chrono>
#include <fstream>
#include <string>

namespace bench {

/// Seconds on the steady clock.
inline double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/// A field of /proc/self/status ("VmRSS:", "VmHWM:") in kB, or of /proc/self/io ("rchar:") in bytes; -1 if absent.
inline long long proc_field(const char* file, const char* key) {
  std::ifstream in(file);
  std::string k;
  long long v = 0;
  while (in >> k) {
    if (k == key) {
      in >> v;
      return v;
    }
  }
  return -1;
}

}  // namespace bench
