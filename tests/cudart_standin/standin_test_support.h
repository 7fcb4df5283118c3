// standin_test_support.h - shared helpers of the stand-in's own tests.
#pragma once

#include "standin.h"

#include <catch2/catch.hpp>

#include <cstddef>
#include <cstring>
#include <vector>

namespace maploc::standin::test {

namespace cuda = maploc::remap::cuda;
inline constexpr int kH2D = cuda::kMemcpyHostToDevice;
inline constexpr int kD2H = cuda::kMemcpyDeviceToHost;

// Reconfigures the stand-in; a test that left something live makes this fail loudly.
inline Control& fresh(const char* spec = "") {
  Control& c = Control::get();
  const int rc = c.configure(spec);
  INFO("configure: " << c.last_message());
  REQUIRE(rc == 0);
  return c;
}

inline std::vector<unsigned char> device_bytes(Control& c, const void* p, std::size_t n) {
  std::vector<unsigned char> out(n);
  REQUIRE(c.device_bytes(p, out.data(), n) == 0);
  return out;
}

inline bool all_equal(const std::vector<unsigned char>& bytes, unsigned char value) {
  for (unsigned char b : bytes)
    if (b != value) return false;
  return true;
}

inline std::string all_violations(Control& c) {
  std::string text;
  for (std::size_t i = 0; i < c.violations(); ++i) text += std::string(c.violation_text(i)) + "\n";
  return text;
}

// Nothing the test made is left (pinned buffers included), and nothing was violated.
inline void require_clean(Control& c) {
  for (const char* what : {"device_allocations", "device_bytes", "pinned_buffers", "streams", "events", "pending_ops"}) {
    INFO(what);
    CHECK(c.live(what) == 0);
  }
  INFO(all_violations(c));
  CHECK(c.violations() == 0);
}

}  // namespace maploc::standin::test
