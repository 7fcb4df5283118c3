// mapped_file_test.cpp - mapping, the read fallback and open errors.
#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "maploc/error.h"
#include "maploc/mapped_file.h"

namespace fs = std::filesystem;

TEST_CASE("a regular file is mapped and its bytes are the file's", "[support]") {
  fs::path p = fs::temp_directory_path() / "maploc_mapped_file_test.bin";
  { std::ofstream(p, std::ios::binary) << "hello maploc"; }
  auto f = maploc::MappedFile::open(p);
  CHECK(f.residency == maploc::Residency::kMapped);
  CHECK(f.bytes.text() == "hello maploc");
  auto view = f.bytes.slice(6, 6);
  f = maploc::MappedFile{};  // the view keeps the mapping alive
  CHECK(view.text() == "maploc");
  fs::remove(p);
}

TEST_CASE("an empty file reads as zero bytes", "[support]") {
  fs::path p = fs::temp_directory_path() / "maploc_mapped_file_empty.bin";
  { std::ofstream(p, std::ios::binary); }
  auto f = maploc::MappedFile::open(p);
  CHECK(f.bytes.size() == 0);
  fs::remove(p);
}

TEST_CASE("a pipe is read instead of mapped", "[support]") {
  FILE* pipe = popen("printf 'piped bytes'", "r");
  REQUIRE(pipe != nullptr);
  auto f = maploc::MappedFile::open("/dev/fd/" + std::to_string(fileno(pipe)));
  pclose(pipe);
  CHECK(f.residency == maploc::Residency::kRead);
  CHECK(f.bytes.text() == "piped bytes");
}

TEST_CASE("a missing file or a folder raises kIoOpen naming the path", "[support]") {
  try {
    maploc::MappedFile::open("/nonexistent/x.pt");
    FAIL("no error");
  } catch (const maploc::Error& e) {
    CHECK(e.code() == maploc::ErrorCode::kIoOpen);
    CHECK(std::string(e.what()).find("/nonexistent/x.pt") != std::string::npos);
  }
  CHECK_THROWS_AS(maploc::MappedFile::open(fs::temp_directory_path()), maploc::Error);
}
