// conformance_test.cpp - our machine and disassembler against CPython on the generated corpus.
#include <catch2/catch.hpp>

#include <fstream>
#include <string>

#include "json_render.h"
#include "maploc/error.h"
#include "maploc/pickle/disassemble.h"
#include "maploc/pickle/machine.h"

namespace mp = maploc::pickle;
using mp::testing::read_file;

namespace {
const std::string kCorpus = std::string(MAPLOC_FIXTURES_DIR) + "/pickle/corpus/";

std::vector<std::string> corpus_cases() {
  std::ifstream f(kCorpus + "index.json");
  const auto index = nlohmann::json::parse(f);
  return index.at("cases").get<std::vector<std::string>>();
}

std::string text_of(const std::vector<std::uint8_t>& b) { return {b.begin(), b.end()}; }
}  // namespace

TEST_CASE("the corpus index lists every generated case", "[pickle]") {
  const auto cases = corpus_cases();
  CHECK(cases.size() >= 150);
}

TEST_CASE("value trees equal CPython's on every corpus case", "[pickle]") {
  for (const auto& name : corpus_cases()) {
    DYNAMIC_SECTION(name) {
      const auto data = read_file(kCorpus + name + ".pkl");
      REQUIRE(!data.empty());
      mp::Options options;
      options.stream_name = name;
      const mp::Result result = mp::run(data, options);
      CHECK(result.end_offset() == data.size());
      auto ours = mp::testing::to_json(result.root());
      auto golden = nlohmann::json::parse(text_of(read_file(kCorpus + name + ".json")));
      mp::testing::sort_sets(ours);
      mp::testing::sort_sets(golden);
      if (ours != golden) {
        INFO("ours:   " << ours.dump().substr(0, 2000));
        INFO("golden: " << golden.dump().substr(0, 2000));
        CHECK(ours == golden);
      }
    }
  }
}

TEST_CASE("disassembly equals pickletools.dis on every corpus case", "[pickle]") {
  for (const auto& name : corpus_cases()) {
    DYNAMIC_SECTION(name) {
      const auto data = read_file(kCorpus + name + ".pkl");
      const std::string golden = text_of(read_file(kCorpus + name + ".dis"));
      std::string ours;
      REQUIRE_NOTHROW(ours = mp::disassemble(data));
      if (ours != golden) {
        // Show the first differing line.
        std::size_t at = 0;
        while (at < ours.size() && at < golden.size() && ours[at] == golden[at]) ++at;
        const std::size_t line = ours.rfind('\n', at) == std::string::npos ? 0 : ours.rfind('\n', at) + 1;
        INFO("ours:   " << ours.substr(line, 200));
        INFO("golden: " << golden.substr(line, 200));
        CHECK(ours == golden);
      }
    }
  }
}
