// machine_test.cpp - walking the value tree: identity, persistent ids, options, back-to-back pickles.
#include <catch2/catch.hpp>

#include <string>

#include "json_render.h"
#include "maploc/error.h"
#include "maploc/pickle/disassemble.h"
#include "maploc/pickle/machine.h"
#include "test_util.h"

namespace mp = maploc::pickle;
using namespace std::literals;
using maploc::ErrorCode;
using mp::Kind;
using mp::testing::bytes_of;

namespace {
const std::string kCorpus = std::string(MAPLOC_FIXTURES_DIR) + "/pickle/corpus/";
}

TEST_CASE("a state_dict-like pickle walks like torch needs it", "[pickle]") {
  for (int proto = 0; proto <= 5; ++proto) {
    DYNAMIC_SECTION("protocol " << proto) {
      const auto data = mp::testing::read_file(kCorpus + "state_dict.p" + std::to_string(proto) + ".pkl");
      REQUIRE(!data.empty());
      std::vector<std::string> keys;
      mp::Options options;
      options.stream_name = "state_dict";
      options.persistent_load = [&](const mp::Value& pid, std::uint64_t) -> std::optional<mp::Value> {
        if (pid.kind() == Kind::kStr) {  // protocol 0 writes str(pid)
          keys.emplace_back(pid.as_str());
          return mp::Value::external(keys.size() - 1);
        }
        REQUIRE(pid.kind() == Kind::kTuple);
        REQUIRE(pid.size() == 5);
        CHECK(pid[0].as_str() == "storage");
        CHECK(pid[1].global_name() == "FloatStorage");
        CHECK(pid[3].as_str() == "cpu");
        keys.emplace_back(pid[2].as_str());
        return mp::Value::external(keys.size() - 1);
      };
      const mp::Result r = mp::run(data, options);
      const mp::Value& root = r.root();
      REQUIRE(root.kind() == Kind::kReduce);
      CHECK(root.callable().is_global("collections", "OrderedDict"));
      const auto items = root.set_items();
      REQUIRE(items.size() == 4);
      CHECK(items[0].key.as_str() == "layer.weight");
      const mp::Value& weight = items[0].value;
      REQUIRE(weight.kind() == Kind::kReduce);
      CHECK(weight.callable().global_name() == "_rebuild_tensor_v2");
      const mp::Value& args = weight.args();
      REQUIRE(args.kind() == Kind::kTuple);
      CHECK(args[0].kind() == Kind::kExternal);
      CHECK(args[1].as_int() == 0);
      CHECK(args[2].elements().size() == 2);
      CHECK(args[4].as_bool() == false);
      // tied weights: the same node twice
      CHECK(items[2].value.same_node(weight));
      CHECK_FALSE(items[1].value.same_node(weight));
      // BUILD recorded the module metadata
      REQUIRE(root.build_states().size() == 1);
      const mp::Value& state = root.build_states()[0];
      REQUIRE(state.kind() == Kind::kDict);
      const mp::Value* meta = state.find("_metadata");
      REQUIRE(meta != nullptr);
      CHECK(meta->kind() == Kind::kReduce);
      CHECK(state.find("missing") == nullptr);
      CHECK(r.globals().size() >= 2);
      CHECK(r.protocol() == (proto >= 2 ? proto : 0));
      CHECK(keys.size() == 3);  // one id per tensor pickled; the tied one is a memo reference
    }
  }
}

TEST_CASE("a rejected persistent id raises kPicklePersistentId", "[pickle]") {
  mp::Options options;
  options.persistent_load = [](const mp::Value&, std::uint64_t) -> std::optional<mp::Value> { return std::nullopt; };
  const auto data = bytes_of("\x80\x02X\x01\x00\x00\x00kQ."sv);
  try {
    (void)mp::run(data, options);
    FAIL("no error");
  } catch (const maploc::Error& e) {
    CHECK(e.code() == ErrorCode::kPicklePersistentId);
    CHECK(e.offset() == 8u);
  }
  // With no callback the id is kept as a node.
  const mp::Result r = mp::run(data);
  REQUIRE(r.root().kind() == Kind::kPersistent);
  CHECK(r.root().persistent_id().as_str() == "k");
}

TEST_CASE("Python 2 strings decode as latin1 str or as bytes", "[pickle]") {
  const auto data = bytes_of("U\x02\xe9\xff."sv);
  const mp::Result latin = mp::run(data);
  CHECK(latin.root().as_str() == "\xc3\xa9\xc3\xbf");
  mp::Options options;
  options.python2_strings = mp::StringDecoding::kBytes;
  const mp::Result raw = mp::run(data, options);
  REQUIRE(raw.root().kind() == Kind::kBytes);
  CHECK(raw.root().as_bytes().size() == 2);
  CHECK(raw.root().as_bytes()[0] == 0xe9);
}

TEST_CASE("_codecs.encode and bytearray are the only calls interpreted", "[pickle]") {
  // Python 3 bytes under protocol 2: _codecs.encode('\xe9a', 'latin1')
  const auto enc = bytes_of("\x80\x02" "c_codecs\nencode\nX\x03\x00\x00\x00\xc3\xa9" "aX\x06\x00\x00\x00latin1\x86R."sv);
  const mp::Result r = mp::run(enc);
  REQUIRE(r.root().kind() == Kind::kBytes);
  CHECK(std::string(r.root().as_bytes().begin(), r.root().as_bytes().end()) == "\xe9" "a");
  const auto arr = bytes_of("\x80\x02" "c__builtin__\nbytearray\n)R."sv);
  CHECK(mp::run(arr).root().kind() == Kind::kByteArray);
  // Anything else stays an inert node: os.system is a name and a record, never a call.
  const auto evil = bytes_of("cos\nsystem\n(S'echo pwned'\ntR."sv);
  const mp::Result e = mp::run(evil);
  REQUIRE(e.root().kind() == Kind::kReduce);
  CHECK(e.root().callable().is_global("os", "system"));
  CHECK(e.root().args()[0].as_str() == "echo pwned");
  CHECK(e.globals().size() == 1);
}

TEST_CASE("fix_imports maps __builtin__ and copy_reg below protocol 3 only", "[pickle]") {
  CHECK(mp::testing::load(("c__builtin__\nset\n."sv)).root().global_module() == "builtins");
  CHECK(mp::testing::load(("\x80\x02" "ccopy_reg\n_reconstructor\n."sv)).root().global_module() == "copyreg");
  CHECK(mp::testing::load(("\x80\x03" "c__builtin__\nset\n."sv)).root().global_module() == "__builtin__");
}

TEST_CASE("pickles back to back: start_offset, allow_trailing and end_offset", "[pickle]") {
  // The legacy torch layout: magic number, protocol version, then more.
  const auto data = bytes_of(
      "\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19\x2e"
      "\x80\x02\x4d\xe9\x03\x2e"
      "\x80\x02]q\x00X\x01\x00\x00\x00ka."sv);
  mp::Options options;
  options.allow_trailing = true;
  const mp::Result magic = mp::run(data, options);
  CHECK(magic.end_offset() == 15u);
  CHECK(magic.root().is_big_int());
  CHECK(magic.root().int_decimal() == "119547037146038801333356");
  options.start_offset = magic.end_offset();
  const mp::Result version = mp::run(data, options);
  CHECK(version.root().as_int() == 1001);
  CHECK(version.end_offset() == 21u);
  options.start_offset = version.end_offset();
  options.allow_trailing = false;
  const mp::Result keys = mp::run(data, options);
  CHECK(keys.root()[0].as_str() == "k");
  CHECK(keys.end_offset() == data.size());
  // The disassembler agrees on where each pickle ends.
  mp::DisOptions dis;
  std::ostringstream sink;
  CHECK(mp::disassemble(data, sink, dis) == 15u);
  dis.start_offset = 15;
  CHECK(mp::disassemble(data, sink, dis) == 21u);
  // Without allow_trailing the first pickle is rejected for what follows it.
  CHECK(mp::testing::error_of(data) == ErrorCode::kPickleTrailingData);
}

TEST_CASE("dict keys follow Python equality: last value wins, first position stays", "[pickle]") {
  const mp::Result r = mp::testing::load(("(S'a'\nI1\nS'b'\nI2\nS'a'\nI3\nI1\nS'int'\nI01\nS'bool'\nd."sv));
  const auto items = r.root().items();
  REQUIRE(items.size() == 3);
  CHECK(items[0].key.as_str() == "a");
  CHECK(items[0].value.as_int() == 3);
  CHECK(items[2].key.as_int() == 1);  // True == 1: one key
  CHECK(items[2].value.as_str() == "bool");
  // Larger dicts go through the hash index.
  std::string big = "}(";
  for (int i = 0; i < 100; ++i) big += "K" + std::string(1, static_cast<char>(i % 50)) + "N";
  big += "u.";
  CHECK(mp::testing::load((big)).root().size() == 50);
}

TEST_CASE("accessors reject the wrong kind with kPickleTypeError", "[pickle]") {
  const mp::Result r = mp::testing::load(("\x80\x02K\x05X\x01\x00\x00\x00s\x86."sv));
  const mp::Value& t = r.root();
  CHECK(t.size() == 2);
  CHECK(t[0].as_int() == 5);
  auto code_of = [](auto&& f) -> std::optional<ErrorCode> {
    try {
      f();
    } catch (const maploc::Error& e) {
      return e.code();
    }
    return std::nullopt;
  };
  CHECK(code_of([&] { (void)t[0].as_str(); }) == ErrorCode::kPickleTypeError);
  CHECK(code_of([&] { (void)t[1].as_int(); }) == ErrorCode::kPickleTypeError);
  CHECK(code_of([&] { (void)t[2]; }) == ErrorCode::kPickleTypeError);
  CHECK(code_of([&] { (void)t.items(); }) == ErrorCode::kPickleTypeError);
  CHECK(code_of([&] { (void)t.callable(); }) == ErrorCode::kPickleTypeError);
  CHECK(t[0].identity() == nullptr);
  CHECK(t.identity() != nullptr);
}

TEST_CASE("big ints keep their exact value", "[pickle]") {
  // LONG1 with a non-minimal encoding of 5 and a 9-byte -2**64
  CHECK(mp::testing::load(("\x80\x02\x8a\x03\x05\x00\x00."sv)).root().as_int() == 5);
  const mp::Result r = mp::testing::load(("\x80\x02\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x00\xff."sv));
  CHECK(r.root().is_big_int());
  CHECK(r.root().int_decimal() == "-18446744073709551616");
  CHECK(r.root().int_bytes().size() == 9);
  CHECK(mp::testing::load(("\x80\x02\x8a\x00."sv)).root().as_int() == 0);
  CHECK(mp::testing::load(("\x80\x02J\xff\xff\xff\xff."sv)).root().as_int() == -1);
  CHECK(mp::Value::integer(-129).int_bytes() == std::vector<std::uint8_t>{0x7f, 0xff});
}

TEST_CASE("the Bytes overload keeps the stream alive", "[pickle]") {
  std::vector<std::uint8_t> buf = bytes_of("\x80\x04\x8c\x05hello\x94."sv);
  std::optional<mp::Result> r;
  {
    maploc::Bytes owned = maploc::Bytes::owned(std::move(buf));
    r.emplace(mp::run(owned));
  }
  CHECK(r->root().as_str() == "hello");
}

TEST_CASE("hashing memo-shared nested tuples in a frozenset is linear, not exponential", "[pickle][limits]") {
  // t0 = (); t(i+1) = (t(i), t(i)) through the memo; frozenset({t60}). Hashed naively,
  // t60 has 2^60 leaves (fuzz_safetensors found a 12 KB file of this shape that took minutes).
  std::string p = "\x80\x04)\x94"s;
  for (int i = 0; i < 60; ++i) {
    p += "h"s + static_cast<char>(i) + "h"s + static_cast<char>(i) + "\x86\x94"s;
  }
  p += "(h"s + static_cast<char>(60) + "\x91."s;
  const std::vector<std::uint8_t> bytes(p.begin(), p.end());
  const auto result = mp::run(bytes);
  REQUIRE(result.root().is(mp::Kind::kFrozenSet));
  CHECK(result.root().size() == 1);
}

namespace {
// A protocol-2 pickle of one LONG4 holding `le` (little-endian two's complement).
std::string long4_pickle(const std::string& le) {
  std::string p = "\x80\x02\x8b"s;
  for (int k = 0; k < 4; ++k) p.push_back(static_cast<char>((le.size() >> (8 * k)) & 0xff));
  return p + le + ".";
}
}  // namespace

TEST_CASE("ints beyond 4300 digits print as Python's hex(), in linear time", "[pickle][limits]") {
  // 2**14284 - 1: 14284 bits, exactly 4300 decimal digits (the last one 5, as 2**14284 ends in 6).
  const std::string below = std::string(14284 / 8, '\xff') + std::string(1, '\x0f') + std::string(1, '\0');
  const mp::Result a = mp::testing::load(long4_pickle(below));
  const std::string dec = a.root().int_decimal();
  CHECK(dec.size() == 4300);
  CHECK(dec.back() == '5');
  // 2**14284: one bit more may need 4301 digits, so it prints as hex(2**14284) does.
  const std::string above = std::string(14284 / 8, '\0') + std::string(1, '\x10');
  const mp::Result b = mp::testing::load(long4_pickle(above));
  CHECK(b.root().int_decimal() == "0x1" + std::string(14284 / 4, '0'));
  // Negative: hex(-2**14284 - 1) == '-0x1' + '0' * 3570 + '1'.
  // -(2**14284) - 1 == ~(2**14284): every bit set but bit 14284.
  const std::string neg = std::string(14284 / 8, '\xff') + std::string(1, '\xef');
  const mp::Result c = mp::testing::load(long4_pickle(neg));
  CHECK(c.root().int_decimal() == "-0x1" + std::string(14284 / 4 - 1, '0') + "1");
  // The cap is a parameter (Limits::pickle_max_int_digits): 2**64 has 20 digits, 10 hold 33 bits.
  const mp::Result d = mp::testing::load(("\x80\x02\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x00\x01."sv));
  CHECK(d.root().int_decimal(10) == "0x10000000000000000");
  CHECK(d.root().int_decimal() == "18446744073709551616");
  // dis prints the same hex for a LONG4 beyond the cap.
  const std::string p = long4_pickle(above);
  const std::string dis = mp::disassemble(std::span(reinterpret_cast<const std::uint8_t*>(p.data()), p.size()));
  CHECK(dis.find(" 0x1" + std::string(14284 / 4, '0') + "\n") != std::string::npos);
}
