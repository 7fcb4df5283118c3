// checkpoint_dis_test.cpp - every torch checkpoint's pickles: the machine runs them, the disassembly matches pickletools.
#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>

#include "json_render.h"
#include "maploc/error.h"
#include "maploc/pickle/disassemble.h"
#include "maploc/pickle/machine.h"
#include "support/sha256.h"

namespace mp = maploc::pickle;
using mp::testing::read_file;

namespace {
const std::string kDis = std::string(MAPLOC_FIXTURES_DIR) + "/pickle/dis/";
}

TEST_CASE("every checkpoint pickle runs and disassembles like pickletools", "[pickle]") {
  std::ifstream f(kDis + "index.json");
  REQUIRE(f.good());
  const auto index = nlohmann::json::parse(f);
  const auto& entries = index.at("entries");
  REQUIRE(entries.size() >= 40);
  for (const auto& e : entries) {
    const std::string file = e.at("file").get<std::string>();
    DYNAMIC_SECTION(file) {
      const auto data = read_file(kDis + e.at("data_pkl").get<std::string>());
      REQUIRE(!data.empty());
      const int pickles = e.at("pickles").get<int>();

      // The machine: each pickle in turn, persistent ids kept as nodes.
      mp::Options options;
      options.stream_name = file;
      options.allow_trailing = true;
      std::uint64_t machine_end = 0;
      for (int k = 0; k < pickles; ++k) {
        options.start_offset = machine_end;
        const mp::Result r = mp::run(data, options);
        CHECK(r.end_offset() > machine_end);
        machine_end = r.end_offset();
      }
      CHECK(machine_end == data.size());

      // The disassembler: the same pickles, the same ends, the golden text.
      std::ostringstream out;
      mp::DisOptions dis;
      dis.stream_name = file;
      std::uint64_t dis_end = 0;
      for (int k = 0; k < pickles; ++k) {
        dis.start_offset = dis_end;
        dis_end = mp::disassemble(data, out, dis);
      }
      CHECK(dis_end == machine_end);
      const std::string text = out.str();
      CHECK(text.size() == e.at("dis_bytes").get<std::size_t>());
      CHECK(maploc::Sha256::hex({reinterpret_cast<const std::uint8_t*>(text.data()), text.size()}) ==
            e.at("dis_sha256").get<std::string>());

      // write_text off (dis --json): nothing written, the same ends, one on_opcode
      // call for each line of the text but the trailers.
      std::ostringstream none;
      mp::DisOptions quiet = dis;
      quiet.write_text = false;
      std::size_t calls = 0;
      quiet.on_opcode = [&](const mp::DisLine&) { ++calls; };
      std::uint64_t quiet_end = 0;
      for (int k = 0; k < pickles; ++k) {
        quiet.start_offset = quiet_end;
        quiet_end = mp::disassemble(data, none, quiet);
      }
      CHECK(quiet_end == dis_end);
      CHECK(none.str().empty());
      CHECK(calls + static_cast<std::size_t>(pickles) ==
            static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n')));
      if (e.contains("dis")) {
        const auto golden = read_file(kDis + e.at("dis").get<std::string>());
        CHECK(text == std::string(golden.begin(), golden.end()));
      }
    }
  }
}
