// error_test.cpp - maploc::Error formatting and code names.
#include <catch2/catch.hpp>

#include "maploc/error.h"
#include "maploc/version.h"

using maploc::Error;
using maploc::ErrorCode;
using maploc::Stage;

TEST_CASE("Error message names stage, offset and item", "[support]") {
  Error e(ErrorCode::kPickleLimitMemo, Stage::kPickle, "LONG_BINPUT index 4294967295 exceeds memo limit", 0x1f3,
          "archive/data.pkl");
  CHECK(std::string(e.what()) ==
        "pickle: LONG_BINPUT index 4294967295 exceeds memo limit at offset 0x1f3 in 'archive/data.pkl'");
  CHECK(e.code() == ErrorCode::kPickleLimitMemo);
  CHECK(e.offset() == 0x1f3u);
  CHECK(e.item() == "archive/data.pkl");
  CHECK(e.message() == "LONG_BINPUT index 4294967295 exceeds memo limit");
}

TEST_CASE("Error without offset or item is just stage and message", "[support]") {
  Error e(ErrorCode::kIoOpen, Stage::kIo, "cannot open file");
  CHECK(std::string(e.what()) == "io: cannot open file");
  CHECK_FALSE(e.offset().has_value());
}

TEST_CASE("every zip code has a symbolic name", "[support]") {
  for (int c = 100; c <= 118; ++c) {
    CHECK(maploc::error_code_name(static_cast<ErrorCode>(c)) != "unknown");
  }
  CHECK(maploc::error_code_name(ErrorCode::kZipTruncated) == "kZipTruncated");
  CHECK(maploc::error_code_name(static_cast<ErrorCode>(999)) == "unknown");
}

TEST_CASE("the headers' version is the project's version", "[support]") {
  CHECK(std::string(maploc::kVersion) == MAPLOC_PROJECT_VERSION);
}
