// test_util.h - small helpers shared by the pickle tests.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "maploc/error.h"
#include "maploc/pickle/machine.h"

namespace maploc::pickle::testing {

inline std::vector<std::uint8_t> bytes_of(std::string_view s) { return {s.begin(), s.end()}; }

/// Runs the machine over a copy of `s` that the Result keeps alive.
inline Result load(std::string_view s, const Options& options = {}) {
  return run(Bytes::owned(bytes_of(s)), options);
}

/// Runs the machine and returns the error code it raised, or nullopt on success.
inline std::optional<ErrorCode> error_of(const std::vector<std::uint8_t>& data, const Options& options = {}) {
  try {
    (void)run(data, options);
  } catch (const Error& e) {
    return e.code();
  }
  return std::nullopt;
}

}  // namespace maploc::pickle::testing
