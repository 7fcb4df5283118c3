// progress.h - a progress bar on stderr for operations that take more than a second (internal).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "commands.h"
#include "maploc/progress.h"

namespace maploc::cli {

/// Draws "label [#####     ] 45%  1.2 GiB / 2.7 GiB  3.1 GB/s" on stderr,
/// only when stderr is a terminal and --quiet was not given, and only once
/// the operation has run for a second. The line is cleared when done.
class ProgressBar {
 public:
  ProgressBar(const Args& args, std::string label);
  ~ProgressBar();
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  /// The callback to hand to the library (empty when the bar is off).
  Progress callback();

 private:
  void draw(std::uint64_t done, std::uint64_t total);

  bool enabled_;
  bool drawn_ = false;
  std::string label_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point last_{};
};

}  // namespace maploc::cli
