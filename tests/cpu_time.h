// cpu_time.h - time bounds that hold on a loaded machine and under the sanitizers: CPU time (a
// loaded machine only ever adds wall-clock time, not CPU time) times kSanitizerSlowdown.
#pragma once

#include <time.h>

namespace maploc::test {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif
#else
inline constexpr bool kSanitized = false;
#endif

/// What a time bound is multiplied by in an ASan or TSan build (both run code 5-15x slower).
inline constexpr double kSanitizerSlowdown = kSanitized ? 10.0 : 1.0;

/// CPU time (user + system) of the clock given: CLOCK_PROCESS_CPUTIME_ID (every thread of this
/// process, what a test whose subject starts threads measures) or CLOCK_THREAD_CPUTIME_ID.
inline double cpu_seconds(clockid_t clock = CLOCK_PROCESS_CPUTIME_ID) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

/// The CPU time spent since it was made.
class CpuTimer {
 public:
  explicit CpuTimer(clockid_t clock = CLOCK_PROCESS_CPUTIME_ID) : clock_(clock), start_(cpu_seconds(clock)) {}
  double seconds() const { return cpu_seconds(clock_) - start_; }

 private:
  clockid_t clock_;
  double start_;
};

}  // namespace maploc::test
