// error_of.h - the maploc::Error a callable throws, for tests of every module.
#pragma once

#include <catch2/catch.hpp>

#include <utility>

#include "maploc/error.h"

namespace maploc::test {

/// Runs f and returns the maploc::Error it throws; fails the test when it throws none.
template <typename F>
Error error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e;
  }
  FAIL("no maploc::Error was thrown");
  throw;  // not reached: FAIL ends the test
}

/// The ErrorCode of the maploc::Error f throws (its message is logged with the test).
template <typename F>
ErrorCode code_of(F&& f) {
  const Error e = error_of(std::forward<F>(f));
  INFO(e.what());
  return e.code();
}

}  // namespace maploc::test
