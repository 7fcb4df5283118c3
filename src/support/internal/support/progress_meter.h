// progress_meter.h - adds up work from several threads and calls a Progress callback, serialized and throttled (internal).
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>

#include "maploc/progress.h"

namespace maploc::detail {

/// Calls `progress` at most ~256 times over `total` bytes, plus once at the end.
class ProgressMeter {
 public:
  ProgressMeter(const Progress& progress, std::uint64_t total)
      : progress_(progress), total_(total), step_(total / 256 + 1) {}

  /// Records n more bytes done; may call the callback (thread-safe).
  void add(std::uint64_t n) {
    if (!progress_) return;
    const std::uint64_t done = done_.fetch_add(n, std::memory_order_relaxed) + n;
    if (done < total_ && done < next_.load(std::memory_order_relaxed)) return;
    const std::lock_guard<std::mutex> lock(mutex_);
    if (done <= reported_) return;
    reported_ = done;
    next_.store(done + step_, std::memory_order_relaxed);
    progress_(done < total_ ? done : total_, total_);
  }

 private:
  const Progress& progress_;
  const std::uint64_t total_;
  const std::uint64_t step_;
  std::atomic<std::uint64_t> done_{0};
  std::atomic<std::uint64_t> next_{0};
  std::mutex mutex_;
  std::uint64_t reported_ = 0;
};

}  // namespace maploc::detail
