// cli_test.cpp - `maploc ls FILE --json --hash` agrees with the fixture manifests.
#include <cstdio>
#include <map>
#include <memory>

#include "torch/torch_test_util.h"

namespace maploc::test {

#ifdef MAPLOC_CLI_PATH
namespace {

nlohmann::json run_ls(const std::string& file) {
  const std::string cmd = std::string("'") + MAPLOC_CLI_PATH + "' ls '" + (checkpoints_dir() / file).string() +
                          "' --json --hash";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(cmd.c_str(), "r"), pclose);
  REQUIRE(pipe);
  std::string out;
  char buf[4096];
  while (std::size_t n = std::fread(buf, 1, sizeof buf, pipe.get())) out.append(buf, n);
  return nlohmann::json::parse(out);
}

}  // namespace

TEST_CASE("ls --json --hash agrees with the manifests", "[torch][cli]") {
  const char* files[] = {"nested_training.t2x.pt", "dtypes.t2x.pt", "views_shared.t113.pt", "dtypes_legacy.t2x.pt",
                         "torchscript.t2x.pt", "dtypes_be.t113.pt"};
  for (const char* file : files) {
    DYNAMIC_SECTION(file) {
      const auto out = run_ls(file);
      const auto m = read_json(checkpoints_dir() / (std::string(file) + ".manifest.json"));
      CHECK(out["format"] == m["format"]);
      CHECK(out["byteorder"] == m["byteorder"]);
      std::map<std::string, nlohmann::json> mine;
      for (const auto& t : out["tensors"]) mine[t["name"].get<std::string>()] = t;
      for (const auto& t : m["tensors"]) {
        const auto name = t["name"].get<std::string>();
        INFO(name);
        REQUIRE(mine.count(name) == 1);
        const auto& x = mine[name];
        CHECK(x["dtype"] == t["dtype"]);
        CHECK(x["shape"] == t["shape"]);
        CHECK(x["stride"] == t["stride"]);
        CHECK(x["storage_offset"] == t["storage_offset"]);
        CHECK(x["storage"] == t["storage_key"]);
        CHECK(x["requires_grad"] == t["requires_grad"]);
        CHECK(x["sha256"] == t["sha256"]);
      }
      std::map<std::string, nlohmann::json> storages;
      for (const auto& s : out["storages"]) storages[s["key"].get<std::string>()] = s;
      for (const auto& s : m["storages"]) {
        const auto& x = storages[s["key"].get<std::string>()];
        CHECK(x["dtype"] == s["dtype"]);
        CHECK(x["numel"] == s["numel"]);
        CHECK(x["nbytes"] == s["nbytes"]);
        CHECK(x["location"] == s["location"]);
      }
      if (m.contains("unsafe_globals") && m["unsafe_globals"].is_array()) CHECK(out["unknown_globals"] == m["unsafe_globals"]);
    }
  }
}
#endif

}  // namespace maploc::test
