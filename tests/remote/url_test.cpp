// url_test.cpp - which texts are URLs, how messages show them, the present-range set.
#include <catch2/catch.hpp>

#include "intervals.h"
#include "maploc/error.h"
#include "maploc/remote/object.h"

using namespace maploc;

TEST_CASE("is_url accepts http, https and s3 only", "[remote]") {
  CHECK(remote::is_url("http://example.com/a.pt"));
  CHECK(remote::is_url("https://example.com/a.pt"));
  CHECK(remote::is_url("s3://bucket/key.pt"));
  CHECK_FALSE(remote::is_url("/tmp/http://x"));
  CHECK_FALSE(remote::is_url("ftp://example.com/a.pt"));
  CHECK_FALSE(remote::is_url("model.pt"));
}

TEST_CASE("display_url drops user information, query and fragment", "[remote]") {
  CHECK(remote::display_url("https://user:secret@host:8443/a/b.pt?X-Amz-Signature=abc#f") == "https://host:8443/a/b.pt");
  CHECK(remote::display_url("http://host/a.pt") == "http://host/a.pt");
  CHECK(remote::display_url("s3://bucket/dir/key.pt") == "s3://bucket/dir/key.pt");
  CHECK(remote::display_url("https://tok@host") == "https://host");
}

TEST_CASE("the present-range set merges and reports what is missing", "[remote]") {
  remote::Intervals s;
  s.add(10, 20);
  s.add(30, 40);
  auto m = s.missing(0, 50);
  REQUIRE(m.size() == 3);
  CHECK((m[0].offset == 0 && m[0].length == 10));
  CHECK((m[1].offset == 20 && m[1].length == 10));
  CHECK((m[2].offset == 40 && m[2].length == 10));
  CHECK(s.missing(12, 18).empty());
  s.add(20, 30);
  CHECK(s.covers(10, 40));
  CHECK(s.missing(5, 45).size() == 2);
  s.add(0, 100);
  CHECK(s.covers(0, 100));
}

TEST_CASE("URLs maploc does not read are kRemoteBadUrl", "[remote]") {
  auto code_of = [](const std::string& url) {
    try {
      (void)remote::Object::open(url);
    } catch (const Error& e) {
      return std::string(error_code_name(e.code()));
    }
    return std::string("no error");
  };
  CHECK(code_of("s3://bucket-only") == "kRemoteBadUrl");
  CHECK(code_of("ftp://example.com/a.pt") == "kRemoteBadUrl");
}
