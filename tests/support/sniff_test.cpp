// sniff_test.cpp - content classification from leading bytes.
#include <catch2/catch.hpp>

#include <string>

#include "support/sniff.h"

using maploc::ContentKind;

namespace {
ContentKind sniff(const std::string& s) {
  return maploc::sniff_content({reinterpret_cast<const std::uint8_t*>(s.data()), s.size()});
}
}  // namespace

TEST_CASE("sniff recognises what users download by mistake", "[support]") {
  CHECK(sniff("") == ContentKind::kEmpty);
  CHECK(sniff("PK\x03\x04rest") == ContentKind::kZip);
  CHECK(sniff("\n  <!DOCTYPE html><html>") == ContentKind::kHtml);
  CHECK(sniff("<html><body>404</body></html>") == ContentKind::kHtml);
  CHECK(sniff("version https://git-lfs.github.com/spec/v1\noid sha256:abc\nsize 12\n") ==
        ContentKind::kGitLfsPointer);
  CHECK(sniff("\x93NUMPY\x01\x00") == ContentKind::kNumpy);
  CHECK(sniff(std::string("\x10\x00\x00\x00\x00\x00\x00\x00{\"a\":1}   ", 18)) == ContentKind::kSafetensors);
  CHECK(sniff("PYTORCH1....") == ContentKind::kTorchPreview);
  CHECK(sniff("hello world") == ContentKind::kUnknown);
}

TEST_CASE("sniff recognises torch's legacy magic after PROTO", "[support]") {
  const std::string legacy("\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19.", 15);
  CHECK(sniff(legacy) == ContentKind::kTorchLegacy);
  CHECK(sniff(std::string("\x80\x04\x95\x05\x00\x00\x00\x00\x00\x00\x00K\x01.", 14)) == ContentKind::kPickle);
}

TEST_CASE("every kind has a description", "[support]") {
  for (int k = 0; k <= static_cast<int>(ContentKind::kUnknown); ++k) {
    CHECK_FALSE(maploc::describe_content(static_cast<ContentKind>(k)).empty());
  }
}
