// json_writer_test.cpp - the CLI's streaming JSON writer prints what nlohmann's dump(2) printed before it.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "json_writer.h"
#include "support/json_string.h"

using maploc::cli::JsonWriter;

namespace {

std::string dbl(double d) {
  std::string s;
  JsonWriter::append_double(s, d);
  return s;
}

std::string str(const std::string& v) {
  std::string s;
  JsonWriter::append_string(s, v);
  return s;
}

}  // namespace

TEST_CASE("doubles print as nlohmann prints them", "[cli]") {
  const std::vector<double> fixed = {0.0,    -0.0,    1.0,     -1.0,  0.5,    0.1,     0.05,   1e-05, 1e-4,
                                     1.5e-4, 1e15,    1e16,    1e17,  123456789012345.0,   1234567890123456.0,
                                     1e21,   1e100,   -2.5e-300, 5e-324, 3.0e-3, 0.0078431372549019607,
                                     std::numeric_limits<double>::max(), std::numeric_limits<double>::min(), 42.0,
                                     1.0 / 3, 2.0 / 3, 100.0, 0.001, 12.375};
  for (double d : fixed) CHECK(dbl(d) == nlohmann::json(d).dump());
  std::mt19937_64 gen(17);
  std::uniform_real_distribution<double> mant(1.0, 10.0);
  std::uniform_int_distribution<int> ex(-30, 30);
  // nlohmann's Grisu2 now and then prints a digit more than the shortest round
  // trip, or another last digit; ours (std::to_chars: shortest, then closest) is
  // then no longer and reads back as the same double.
  int same = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    const double d = mant(gen) * std::pow(10.0, ex(gen)) * (i % 2 ? -1 : 1);
    const std::string ours = dbl(d), theirs = nlohmann::json(d).dump();
    if (ours == theirs) {
      ++same;
      continue;
    }
    INFO(ours << " vs " << theirs);
    REQUIRE(ours.size() <= theirs.size());
    REQUIRE(std::stod(theirs) == d);
    REQUIRE(std::stod(ours) == d);
  }
  CHECK(same > n * 99 / 100);
  CHECK(dbl(std::nan("")) == "null");
  CHECK(dbl(std::numeric_limits<double>::infinity()) == "null");
}

TEST_CASE("strings are escaped as nlohmann escapes them", "[cli]") {
  std::vector<std::string> cases = {"", "plain", "quote\" back\\slash", "tab\tnl\ncr\rff\fbs\b", "\x7f del",
                                    "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80", std::string("nul\0x", 5)};
  for (int c = 0; c < 0x20; ++c) cases.push_back(std::string(1, static_cast<char>(c)) + "x");
  for (const auto& s : cases) CHECK(str(s) == nlohmann::json(s).dump());
  // Invalid UTF-8 (nlohmann's dump threw here): each byte as the text \xNN, never copied.
  CHECK(str("a\xFF" "b") == R"("a\\xffb")");
  CHECK(str("\xC0\x80") == R"("\\xc0\\x80")");
  CHECK(str("\xED\xA0\x80") == R"("\\xed\\xa0\\x80")");  // an encoded surrogate
  CHECK(str("\xF4\x90\x80\x80") == R"("\\xf4\\x90\\x80\\x80")");  // above U+10FFFF
  CHECK(str("\xE2\x82") == R"("\\xe2\\x82")");  // cut short
  CHECK(str("caf\xC3") == R"("caf\\xc3")");
}

TEST_CASE("the one JSON string escaper writes strict UTF-8 JSON for any bytes", "[cli][json]") {
  // Names differing only in invalid bytes stay different; output always parses as strict JSON.
  std::vector<std::string> cases = {"quo\"te", "back\\slash", "ctl\x01\x1f\x7f", "\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80",
                                    "bad\xFF", "bad\xFE", "\x80", "mixed \xC3\xA9\xFF\"\\\n"};
  std::vector<std::string> decoded;
  for (const auto& s : cases) {
    INFO(s);
    const std::string json = maploc::detail::json_string(s);
    CHECK(maploc::detail::invalid_utf8_at(json) == std::string::npos);
    const auto parsed = nlohmann::json::parse(json);  // nlohmann rejects invalid UTF-8
    decoded.push_back(parsed.get<std::string>());
    if (maploc::detail::invalid_utf8_at(s) == std::string::npos) CHECK(decoded.back() == s);  // valid: unchanged
  }
  CHECK(decoded[4] == "bad\\xff");
  CHECK(decoded[4] != decoded[5]);
  CHECK(decoded[7] == "mixed \xC3\xA9\\xff\"\\\n");
  CHECK(maploc::detail::invalid_utf8_at("ok\xC3\xA9x\xFF") == 5);
  CHECK(maploc::detail::invalid_utf8_at("ok") == std::string::npos);
  // The CLI's writer and the shared escaper are one.
  for (const auto& s : cases) CHECK(str(s) == maploc::detail::json_string(s));
}

TEST_CASE("a document is laid out as dump(2) lays it out", "[cli]") {
  nlohmann::json ref = {{"a", 1},
                        {"b", nlohmann::json::array()},
                        {"c", nlohmann::json::object()},
                        {"d", {1, 2, 3}},
                        {"e", {{"x", nullptr}, {"y", true}, {"z", -7}}},
                        {"f", {nlohmann::json::object(), {{"k", "v"}}}},
                        {"g", std::uint64_t{18446744073709551615ull}}};
  std::string out;
  JsonWriter w(out);
  w.begin_object().field("a", 1).key("b").begin_array().end_array().key("c").begin_object().end_object();
  w.key("d").array(std::vector<int>{1, 2, 3});
  w.key("e").begin_object().key("x").null().field("y", true).field("z", -7).end_object();
  w.key("f").begin_array().begin_object().end_object().begin_object().field("k", "v").end_object().end_array();
  w.field("g", std::uint64_t{18446744073709551615ull}).end_object();
  CHECK(out == ref.dump(2));

  // A value written apart at the depth where it lands (dis --json's opcodes).
  std::string inner;
  JsonWriter(inner, 3).begin_array().value(1).begin_object().field("q", 2).end_object().end_array();
  std::string outer;
  JsonWriter(outer).begin_object().key("p").begin_array().begin_object().key("o").raw_value(inner).end_object()
      .end_array().end_object();
  CHECK(outer == nlohmann::json({{"p", {{{"o", {1, {{"q", 2}}}}}}}}).dump(2));
}

TEST_CASE("keys out of byte order or twice are refused", "[cli]") {
  std::string out;
  JsonWriter w(out);
  w.begin_object().field("b", 1);
  CHECK_THROWS_AS(w.key("a"), std::logic_error);
  CHECK_THROWS_AS(w.key("b"), std::logic_error);
  std::string out2;
  JsonWriter w2(out2);
  w2.begin_object();
  CHECK_THROWS_AS(w2.value(1), std::logic_error);
  CHECK_THROWS_AS(w2.end_array(), std::logic_error);
}
