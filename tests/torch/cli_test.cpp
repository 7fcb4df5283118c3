// cli_test.cpp - `maploc ls FILE --json --hash` agrees with the fixture manifests.
#include <cstdio>
#include <map>
#include <memory>

#include "torch/torch_test_util.h"

namespace maploc::test {

#ifdef MAPLOC_CLI_PATH
namespace {

nlohmann::json run_ls(const std::filesystem::path& path) {
  const std::string cmd = std::string("'") + MAPLOC_CLI_PATH + "' ls '" + path.string() + "' --json --hash";
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
      const auto out = run_ls(checkpoints_dir() / file);
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

TEST_CASE("ls --json shows torch's conj/neg bits and --hash hashes the stored values", "[torch][cli]") {
  const auto dir = std::filesystem::path(MAPLOC_FIXTURES_DIR) / "rebuilds";
  const auto out = run_ls(dir / "conj_neg.t2x.pt");
  const auto want = read_json(dir / "conj_neg.t2x.pt.expected.json")["tensors"];
  REQUIRE(out["tensors"].size() == want.size());
  for (const auto& t : out["tensors"]) {
    const auto name = t["name"].get<std::string>();
    INFO(name);
    REQUIRE(want.contains(name));
    const auto& w = want[name];
    // The keys appear only when set, as docs/cli-ls.md says.
    CHECK(t.value("conj", false) == w["conj"].get<bool>());
    CHECK(t.value("neg", false) == w["neg"].get<bool>());
    CHECK(t.contains("conj") == w["conj"].get<bool>());
    CHECK(t.contains("neg") == w["neg"].get<bool>());
    CHECK(t["dtype"] == w["dtype"]);
    CHECK(t["sha256"] == w["sha256"]);
  }
}
#endif

}  // namespace maploc::test
