// malformed_test.cpp - hostile and broken pickles: one table of {name, bytes, ErrorCode}, truncations, bombs, limits.
#include <catch2/catch.hpp>

#include <string>

#include "cpu_time.h"
#include "json_render.h"
#include "maploc/error.h"
#include "maploc/pickle/disassemble.h"
#include "maploc/pickle/machine.h"
#include "test_util.h"

namespace mp = maploc::pickle;
using namespace std::literals;
using maploc::ErrorCode;
using mp::testing::bytes_of;
using mp::testing::error_of;

namespace {
const std::string kCorpus = std::string(MAPLOC_FIXTURES_DIR) + "/pickle/corpus/";

struct BadCase {
  const char* name;
  std::string bytes;
  ErrorCode code;
};

std::string s(const char* p, std::size_t n) { return std::string(p, n); }
#define B(lit) s(lit, sizeof(lit) - 1)

const BadCase kBadCases[] = {
    {"empty stream", "", ErrorCode::kPickleTruncated},
    {"no STOP", B("K\x01"), ErrorCode::kPickleTruncated},
    {"unknown opcode 0xff", B("N\xff."), ErrorCode::kPickleUnknownOpcode},
    {"unknown opcode 0x00", B("\x00"), ErrorCode::kPickleUnknownOpcode},
    {"unknown opcode 0x99", B("\x80\x05\x99."), ErrorCode::kPickleUnknownOpcode},
    {"trailing garbage after STOP", B("N.x"), ErrorCode::kPickleTrailingData},
    {"second pickle after STOP", B("N.N."), ErrorCode::kPickleTrailingData},
    {"STOP on an empty stack", B("."), ErrorCode::kPickleStackUnderflow},
    {"STOP right after MARK", B("N(."), ErrorCode::kPickleStackUnderflow},
    {"APPEND on an empty stack", B("a."), ErrorCode::kPickleStackUnderflow},
    {"APPEND with one item", B("K\x01" "a."), ErrorCode::kPickleStackUnderflow},
    {"APPEND across a MARK", B("](K\x01" "a."), ErrorCode::kPickleStackUnderflow},
    {"TUPLE1 on an empty stack", B("\x85."), ErrorCode::kPickleStackUnderflow},
    {"TUPLE2 with one item", B("K\x01\x86."), ErrorCode::kPickleStackUnderflow},
    {"TUPLE3 across a MARK", B("K\x01K\x02(K\x03\x87."), ErrorCode::kPickleStackUnderflow},
    {"SETITEM with two items", B("K\x01K\x02s."), ErrorCode::kPickleStackUnderflow},
    {"POP on an empty stack", B("0."), ErrorCode::kPickleStackUnderflow},
    {"DUP on an empty stack", B("2."), ErrorCode::kPickleStackUnderflow},
    {"BINPUT on an empty stack", B("q\x00."), ErrorCode::kPickleStackUnderflow},
    {"REDUCE with one item", B("N" "R."), ErrorCode::kPickleStackUnderflow},
    {"BUILD on an empty stack", B("b."), ErrorCode::kPickleStackUnderflow},
    {"NEWOBJ with one item", B("N\x81."), ErrorCode::kPickleStackUnderflow},
    {"NEWOBJ_EX with two items", B("NN\x92."), ErrorCode::kPickleStackUnderflow},
    {"STACK_GLOBAL with one item", B("\x8c\x01m\x93."), ErrorCode::kPickleStackUnderflow},
    {"BINPERSID on an empty stack", B("Q."), ErrorCode::kPickleStackUnderflow},
    {"OBJ with an empty MARK", B("(o."), ErrorCode::kPickleStackUnderflow},
    {"SETITEMS with no dict below the MARK", B("(K\x01K\x02u."), ErrorCode::kPickleStackUnderflow},
    {"TUPLE without MARK", B("K\x01t."), ErrorCode::kPickleMarkNotFound},
    {"LIST without MARK", B("l."), ErrorCode::kPickleMarkNotFound},
    {"DICT without MARK", B("d."), ErrorCode::kPickleMarkNotFound},
    {"APPENDS without MARK", B("]K\x01" "e."), ErrorCode::kPickleMarkNotFound},
    {"SETITEMS without MARK", B("}K\x01K\x02u."), ErrorCode::kPickleMarkNotFound},
    {"POP_MARK without MARK", B("K\x01" "1."), ErrorCode::kPickleMarkNotFound},
    {"FROZENSET without MARK", B("\x91."), ErrorCode::kPickleMarkNotFound},
    {"ADDITEMS without MARK", B("\x8f\x90."), ErrorCode::kPickleMarkNotFound},
    {"INST without MARK", B("imod\ncls\n."), ErrorCode::kPickleMarkNotFound},
    {"BINGET of an unset index", B("h\x00."), ErrorCode::kPickleMemoMissing},
    {"LONG_BINGET of an unset index", B("N" "q\x00j\x05\x00\x00\x00."), ErrorCode::kPickleMemoMissing},
    {"GET of an unset index", B("g7\n."), ErrorCode::kPickleMemoMissing},
    {"LONG_BINPUT 4294967295", B("K\x01r\xff\xff\xff\xff."), ErrorCode::kPickleLimitMemo},
    {"PUT of a negative index", B("K\x01p-1\n."), ErrorCode::kPickleBadArgument},
    {"INT that is no number", B("Ifoo\n."), ErrorCode::kPickleBadArgument},
    {"LONG that is no number", B("L12x\n."), ErrorCode::kPickleBadArgument},
    {"FLOAT that is no number", B("Fabc\n."), ErrorCode::kPickleBadArgument},
    {"FLOAT nan(...) form", B("Fnan(1)\n."), ErrorCode::kPickleBadArgument},
    {"STRING without quotes", B("Sabc\n."), ErrorCode::kPickleBadArgument},
    {"STRING with a bad \\x escape", B("S'abc\\x4'\n."), ErrorCode::kPickleBadArgument},
    {"STRING ending in a backslash", B("S'a\\'\n."), ErrorCode::kPickleBadArgument},
    {"UNICODE with a truncated \\u", B("V\\u12\n."), ErrorCode::kPickleBadArgument},
    {"UNICODE with \\U out of range", B("V\\U00110000\n."), ErrorCode::kPickleBadArgument},
    {"BINUNICODE with invalid UTF-8", B("X\x02\x00\x00\x00\xff\xfe."), ErrorCode::kPickleBadArgument},
    {"SHORT_BINUNICODE overlong NUL", B("\x8c\x02\xc0\x80."), ErrorCode::kPickleBadArgument},
    {"SHORT_BINUNICODE past U+10FFFF", B("\x8c\x04\xf4\x90\x80\x80."), ErrorCode::kPickleBadArgument},
    {"GLOBAL with invalid UTF-8", B("c\xff\nx\n."), ErrorCode::kPickleBadArgument},
    {"PERSID that is not ASCII", B("P\xff\n."), ErrorCode::kPickleBadArgument},
    {"PROTO 6", B("\x80\x06N."), ErrorCode::kPickleBadArgument},
    {"BINSTRING with a negative length", B("T\xff\xff\xff\xff."), ErrorCode::kPickleBadArgument},
    {"LONG4 with a negative length", B("\x8b\xff\xff\xff\xff."), ErrorCode::kPickleBadArgument},
    {"DICT with an odd item count", B("(K\x01K\x02K\x03" "d."), ErrorCode::kPickleBadArgument},
    {"SETITEMS with an odd item count", B("}(K\x01u."), ErrorCode::kPickleBadArgument},
    {"bytearray('\\u0100', 'latin1')",
     B("\x80\x02" "c__builtin__\nbytearray\nX\x02\x00\x00\x00\xc4\x80X\x06\x00\x00\x00latin1\x86R."),
     ErrorCode::kPickleBadArgument},
    {"opcode straddling its FRAME", B("\x80\x04\x95\x02\x00\x00\x00\x00\x00\x00\x00J\x01\x02\x03\x04."),
     ErrorCode::kPickleBadArgument},
    {"FRAME inside a FRAME", B("\x80\x04\x95\x0a\x00\x00\x00\x00\x00\x00\x00\x95\x01\x00\x00\x00\x00\x00\x00\x00N."),
     ErrorCode::kPickleBadArgument},
    {"BINUNICODE declaring 4 GiB", B("X\xff\xff\xff\xff" "abc"), ErrorCode::kPickleLimitStringBytes},
    {"BINBYTES8 declaring 2^64-1", B("\x8e\xff\xff\xff\xff\xff\xff\xff\xff" "abc"), ErrorCode::kPickleLimitStringBytes},
    {"BINUNICODE8 declaring 2^63", B("\x8d\x00\x00\x00\x00\x00\x00\x00\x80" "abc"), ErrorCode::kPickleLimitStringBytes},
    {"BYTEARRAY8 declaring 2^40", B("\x96\x00\x00\x00\x00\x00\x01\x00\x00" "abc"), ErrorCode::kPickleLimitStringBytes},
    {"BINBYTES declaring 256 MiB", B("B\x00\x00\x00\x10" "abc"), ErrorCode::kPickleTruncated},
    {"LONG4 declaring 2 GiB - 1", B("\x8b\xff\xff\xff\x7f" "abc"), ErrorCode::kPickleTruncated},
    {"FRAME declaring 2^64-1", B("\x80\x04\x95\xff\xff\xff\xff\xff\xff\xff\xff" "N."), ErrorCode::kPickleTruncated},
    {"GLOBAL without its newline", B("cmod\nname"), ErrorCode::kPickleTruncated},
    {"BININT cut short", B("J\x01\x02"), ErrorCode::kPickleTruncated},
    {"BINFLOAT cut short", B("G\x40\x09"), ErrorCode::kPickleTruncated},
    {"EXT1", B("\x82\x01."), ErrorCode::kPickleUnsupportedOpcode},
    {"EXT2", B("\x83\x01\x00."), ErrorCode::kPickleUnsupportedOpcode},
    {"EXT4", B("\x84\x01\x00\x00\x00."), ErrorCode::kPickleUnsupportedOpcode},
    {"NEXT_BUFFER", B("\x80\x05\x97."), ErrorCode::kPickleUnsupportedOpcode},
    {"READONLY_BUFFER", B("\x80\x05" "C\x01x\x98."), ErrorCode::kPickleUnsupportedOpcode},
    {"SETITEM on an int", B("K\x00K\x01K\x02s."), ErrorCode::kPickleTypeError},
    {"SETITEM on a list", B("]K\x01K\x02s."), ErrorCode::kPickleTypeError},
    {"APPEND on a dict", B("}K\x01" "a."), ErrorCode::kPickleTypeError},
    {"APPENDS on a tuple", B(")(K\x01" "e."), ErrorCode::kPickleTypeError},
    {"a list as dict key", B("}]K\x01s."), ErrorCode::kPickleTypeError},
    {"a dict inside a tuple key", B("}}\x85K\x01s."), ErrorCode::kPickleTypeError},
    {"a list in a frozenset", B("(]\x91."), ErrorCode::kPickleTypeError},
    {"ADDITEMS on a list", B("](K\x01\x90."), ErrorCode::kPickleTypeError},
    {"ADDITEMS of a list into a set", B("\x8f(]\x90."), ErrorCode::kPickleTypeError},
    {"STACK_GLOBAL with non-str names", B("K\x01N\x93."), ErrorCode::kPickleTypeError},
    {"BUILD on a list", B("]Nb."), ErrorCode::kPickleTypeError},
    {"BUILD on a str", B("\x8c\x01xNb."), ErrorCode::kPickleTypeError},
};
#undef B
}  // namespace

TEST_CASE("malformed pickles raise the documented ErrorCode", "[pickle][malformed]") {
  STATIC_REQUIRE(std::size(kBadCases) >= 50);
  for (const auto& c : kBadCases) {
    DYNAMIC_SECTION(c.name) {
      const auto data = bytes_of(c.bytes);
      mp::Options options;
      options.stream_name = "bad.pkl";
      try {
        (void)mp::run(data, options);
        FAIL("no error for " << c.name);
      } catch (const maploc::Error& e) {
        INFO(e.what());
        CHECK(e.code() == c.code);
        CHECK(e.stage() == maploc::Stage::kPickle);
        CHECK(e.item() == "bad.pkl");
        REQUIRE(e.offset().has_value());
        CHECK(*e.offset() <= data.size());
      }
    }
  }
}

TEST_CASE("the disassembler rejects malformed pickles without crashing", "[pickle][malformed]") {
  for (const auto& c : kBadCases) {
    const auto data = bytes_of(c.bytes);
    std::ostringstream out;
    try {
      mp::disassemble(data, out);
    } catch (const maploc::Error& e) {
      CHECK(e.stage() == maploc::Stage::kPickle);
    }
  }
}

TEST_CASE("errors name the opcode, offset, item and the limit to raise", "[pickle][malformed]") {
  mp::Options options;
  options.stream_name = "archive/data.pkl";
  try {
    (void)mp::testing::load((std::string("\x80\x02K\x01r\xff\xff\xff\xff.", 11)), options);
    FAIL("no error");
  } catch (const maploc::Error& e) {
    const std::string what = e.what();
    INFO(what);
    CHECK(what.find("LONG_BINPUT index 4294967295 exceeds memo limit 16777216") != std::string::npos);
    CHECK(what.find("raise Limits::pickle_max_memo_entries") != std::string::npos);
    CHECK(what.find("'archive/data.pkl'") != std::string::npos);
    CHECK(e.offset() == 4u);
  }
  try {
    (void)mp::testing::load((std::string("N\xff", 2)));
    FAIL("no error");
  } catch (const maploc::Error& e) {
    CHECK(std::string(e.what()).find("unknown opcode 0xff") != std::string::npos);
    CHECK(e.offset() == 1u);
  }
}

TEST_CASE("every truncation of a real pickle is kPickleTruncated", "[pickle][malformed]") {
  for (const char* name : {"state_dict.p2", "state_dict.p0", "objects.p4", "strs.p5"}) {
    const auto full = mp::testing::read_file(kCorpus + name + ".pkl");
    REQUIRE(full.size() > 10);
    for (std::size_t cut = 0; cut < full.size(); ++cut) {
      const std::vector<std::uint8_t> part(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(cut));
      const auto code = error_of(part);
      INFO(name << " cut at " << cut);
      CHECK(code == ErrorCode::kPickleTruncated);
      std::ostringstream out;
      CHECK_THROWS_AS(mp::disassemble(part, out), maploc::Error);
    }
  }
}

TEST_CASE("each pickle limit is enforced with its own code", "[pickle][limits]") {
  mp::Options o;
  SECTION("pickle_max_stack_depth: values") {
    o.limits.pickle_max_stack_depth = 10;
    CHECK(error_of(bytes_of(std::string(11, 'N') + "."), o) == ErrorCode::kPickleLimitStackDepth);
    CHECK_FALSE(error_of(bytes_of(std::string(9, 'N') + "."), o));
  }
  SECTION("pickle_max_stack_depth: marks") {
    o.limits.pickle_max_stack_depth = 10;
    CHECK(error_of(bytes_of(std::string(11, '(') + "."), o) == ErrorCode::kPickleLimitStackDepth);
  }
  SECTION("pickle_max_nesting_depth: a TUPLE1 chain") {
    CHECK(error_of(bytes_of("N"s + std::string(2000, '\x85') + ".")) == ErrorCode::kPickleLimitNesting);
    o.limits.pickle_max_nesting_depth = 3000;
    CHECK_FALSE(error_of(bytes_of("N"s + std::string(2000, '\x85') + "."), o));
  }
  SECTION("pickle_max_nesting_depth: lists nested through the memo") {
    // L_k = [] memoized; then L_k.append(L_{k+1}) while L_{k+1} is still
    // empty, so no single APPEND sees the depth: the final walk does.
    std::string p = "\x80\x02";
    const int n = 1500;
    for (int k = 0; k < n; ++k) p += "]r" + std::string(reinterpret_cast<const char*>(&k), 4) + "0";
    for (int k = 0; k + 1 < n; ++k) {
      const int next = k + 1;
      p += "j" + std::string(reinterpret_cast<const char*>(&k), 4) + "j" +
           std::string(reinterpret_cast<const char*>(&next), 4) + "a0";
    }
    p += "j" + std::string(4, '\0') + ".";
    CHECK(error_of(bytes_of(p)) == ErrorCode::kPickleLimitNesting);
  }
  SECTION("pickle_max_memo_entries") {
    o.limits.pickle_max_memo_entries = 4;
    CHECK(error_of(bytes_of("Nq\x00q\x01q\x02q\x03q\x04."sv), o) == ErrorCode::kPickleLimitMemo);
    CHECK(error_of(bytes_of("\x80\x04N\x94\x94\x94\x94\x94."sv), o) == ErrorCode::kPickleLimitMemo);
    CHECK_FALSE(error_of(bytes_of("Nq\x00q\x01q\x02q\x03."sv), o));
  }
  SECTION("pickle_max_string_bytes") {
    o.limits.pickle_max_string_bytes = 10;
    CHECK(error_of(bytes_of("X\x0b\x00\x00\x00"s + std::string(11, 'a') + "."), o) ==
          ErrorCode::kPickleLimitStringBytes);
    CHECK(error_of(bytes_of("V"s + std::string(20, 'a') + "\n."), o) == ErrorCode::kPickleLimitStringBytes);
    CHECK_FALSE(error_of(bytes_of("X\x0a\x00\x00\x00"s + std::string(10, 'a') + "."), o));
  }
  SECTION("pickle_max_container_items") {
    o.limits.pickle_max_container_items = 3;
    CHECK(error_of(bytes_of("(K\x01K\x02K\x03K\x04l."sv), o) == ErrorCode::kPickleLimitContainerItems);
    CHECK(error_of(bytes_of("](K\x01K\x02" "e(K\x03K\x04" "e."), o) == ErrorCode::kPickleLimitContainerItems);
    CHECK(error_of(bytes_of("}(K\x01NK\x02NK\x03NK\x04Nu."sv), o) == ErrorCode::kPickleLimitContainerItems);
    CHECK_FALSE(error_of(bytes_of("(K\x01K\x02K\x03l."sv), o));
  }
  SECTION("pickle_max_total_bytes") {
    o.limits.pickle_max_total_bytes = 1000;
    std::string p = "](";
    for (int i = 0; i < 200; ++i) p += "N";
    p += "e.";
    CHECK(error_of(bytes_of(p), o) == ErrorCode::kPickleLimitTotalBytes);
    CHECK(error_of(bytes_of("V\\u00e9"s + std::string(2000, 'a') + "\n."), o) == ErrorCode::kPickleLimitTotalBytes);
  }
}

TEST_CASE("a memo bomb shares one node instead of copying it", "[pickle][limits][malformed]") {
  // 1 MiB of bytes referenced a million times: copying would need 1 TB.
  std::string p = "\x80\x03" "B"s + std::string("\x00\x00\x10\x00", 4) + std::string(1 << 20, 'x') + "q\x00("s;
  for (int i = 0; i < 1000000; ++i) p += "h\x00"s;
  p += "l.";
  const auto data = bytes_of(p);
  const maploc::test::CpuTimer cpu;
  const mp::Result r = mp::run(data);
  const double secs = cpu.seconds();
  const auto items = r.root().elements();
  REQUIRE(items.size() == 1000000);
  CHECK(items.front().same_node(items.back()));
  CHECK(items.front().as_bytes().data() == data.data() + 7);  // a view, not a copy
  INFO("cpu " << secs << " s");
  CHECK(secs < 5.0 * maploc::test::kSanitizerSlowdown);
}

TEST_CASE("billion laughs: 10^9 logical references in a few hundred bytes", "[pickle][limits][malformed]") {
  std::string p = "\x80\x02]q\x00"s;  // L0 = []
  for (int level = 1; level <= 9; ++level) {
    p += "(";
    for (int k = 0; k < 10; ++k) p += "h" + std::string(1, static_cast<char>(level - 1));
    p += "lq" + std::string(1, static_cast<char>(level));
  }
  p += ".";
  const maploc::test::CpuTimer cpu;
  const mp::Result r = mp::testing::load((p));
  CHECK(cpu.seconds() < 1.0 * maploc::test::kSanitizerSlowdown);
  CHECK(r.root().size() == 10);
  CHECK(r.root()[0].same_node(r.root()[9]));
  CHECK(r.opcode_count() < 200);
}

TEST_CASE("a million nested lists: rejected by the limit, loaded and freed without recursion when allowed",
          "[pickle][limits][malformed]") {
  const int n = 1000000;
  const std::string p = std::string(n, ']') + std::string(n - 1, 'a') + ".";
  CHECK(error_of(bytes_of(p)) == ErrorCode::kPickleLimitNesting);
  mp::Options o;
  o.limits.pickle_max_nesting_depth = 2 * n;
  o.limits.pickle_max_stack_depth = 2 * n;
  std::optional<mp::Result> r;
  r.emplace(mp::testing::load((p), o));
  CHECK(r->root().size() == 1);
  r.reset();  // tearing down a million-deep tree must not overflow the stack
}
