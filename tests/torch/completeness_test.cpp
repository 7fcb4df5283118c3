// completeness_test.cpp - nothing silently dropped (docs/torch.md): every storage of every fixture is
// reached by a named tensor (two hand-made pickles name why not); a storage or a rebuild maploc cannot
// name is reported, and strict opening, LoadOptions::strict and `--strict` refuse it.
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "maploc/torch/checkpoint.h"
#include "run_shell.h"
#include "torch/pickle_bytes.h"
#include "torch/torch_test_util.h"

namespace maploc::test {
namespace {

using torch::Checkpoint;

std::string quoted(const std::filesystem::path& p) { return "'" + p.string() + "'"; }

// torch._utils._rebuild_tensor_v2(storage '0', 0, (4,), (1,), False, None)
const std::string kTensor = "ctorch._utils\n_rebuild_tensor_v2\n((" + str("storage") + "ctorch\nFloatStorage\n" +
                            str("0") + str("cpu") + "K\x04tQ" + std::string("K\x00", 2) + "K\x04\x85K\x01\x85\x89NtR";

// {'held': mymod.Holder(tensor)}: the tensor is an argument of a call maploc does not make.
Buffer held_by_unknown_call() { return legacy("\x80\x02}" + str("held") + "cmymod\nHolder\n(" + kTensor + "tRs."); }
// {'t': torch._utils._rebuild_future(storage '0', ...)}: a rebuild function maploc does not know.
Buffer unknown_rebuild() {
  return legacy("\x80\x02}" + str("t") + "ctorch._utils\n_rebuild_future\n((" + str("storage") +
                "ctorch\nFloatStorage\n" + str("0") + str("cpu") + "K\x04tQtRs.");
}

// Hand-made fixtures (fixtures/pydicts, written by the project's own pickler) where a storage is
// reached by no tensor torch's state_dict view names either, and why.
const std::map<std::string, std::string> kExplained = {
    {"duplicate_keys", "a repeated key: the dict keeps the last value, as torch's does; the first value's "
                       "storage is loaded and held by nothing"},
    {"od_build_only", "an OrderedDict whose BUILD state sets _metadata = {'w': tensor}: maploc does not walk a "
                      "state_dict's _metadata (torch keeps module versions there), so that tensor is reported"},
};

}  // namespace

TEST_CASE("completeness: every storage of every fixture is reached by a named tensor", "[torch][completeness]") {
  std::size_t opened = 0, explained = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(MAPLOC_FIXTURES_DIR)) {
    const std::string p = entry.path().string();
    const std::string suffix = ".manifest.json";
    if (p.size() <= suffix.size() || p.compare(p.size() - suffix.size(), suffix.size(), suffix) != 0) continue;
    const std::filesystem::path file = p.substr(0, p.size() - suffix.size());
    if (!std::filesystem::is_regular_file(file)) continue;
    INFO(file);
    std::vector<std::string> warnings;
    torch::Options o;
    o.diagnostics = [&](std::string_view m) { warnings.emplace_back(m); };
    std::optional<Checkpoint> c;
    try {
      c.emplace(Checkpoint::open(file, o));
    } catch (const Error& e) {
      continue;  // files maploc refuses on purpose are tested where they are made; here: what opens
    }
    ++opened;
    CHECK(c->unknown_rebuilds().empty());
    const std::string stem = file.stem().stem().string();  // duplicate_keys.zip.pt -> duplicate_keys
    if (kExplained.count(stem) != 0 && file.parent_path().filename() == "pydicts") {
      INFO(kExplained.at(stem));
      CHECK(c->unreferenced_storages().size() == 1);
      CHECK(warnings.size() >= 1);
      ++explained;
      continue;
    }
    CHECK(c->unreferenced_storages().empty());
  }
  CHECK(opened >= 100);  // 103 when this was written: every torch-written fixture that opens
  CHECK(explained == 4);  // both, zip and legacy
}

TEST_CASE("completeness: a storage no tensor reaches is reported, and refused when strict", "[torch][completeness]") {
  std::vector<std::string> warnings;
  torch::Options o;
  o.diagnostics = [&](std::string_view m) { warnings.emplace_back(m); };
  const Checkpoint c = open_bytes(held_by_unknown_call(), o);
  CHECK(c.tensors().empty());
  REQUIRE(c.unreferenced_storages() == std::vector<std::size_t>{0});
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0].find("storage '0'") != std::string::npos);
  CHECK(warnings[0].find("test.pt") != std::string::npos);
  o.strict = true;
  const Error e = error_of([&] { (void)open_bytes(held_by_unknown_call(), o); });
  CHECK(e.code() == ErrorCode::kTorchIncomplete);
  CHECK(std::string(e.what()).find("storage '0'") != std::string::npos);
}

TEST_CASE("completeness: a rebuild function maploc does not know is reported, and refused when strict",
          "[torch][completeness]") {
  std::vector<std::string> warnings;
  torch::Options o;
  o.diagnostics = [&](std::string_view m) { warnings.emplace_back(m); };
  const Checkpoint c = open_bytes(unknown_rebuild(), o);
  CHECK(c.unknown_rebuilds() == std::vector<std::string>{"torch._utils._rebuild_future"});
  CHECK(c.unreferenced_storages() == std::vector<std::size_t>{0});
  CHECK(warnings.size() == 2);
  o.strict = true;
  CHECK(error_of([&] { (void)open_bytes(unknown_rebuild(), o); }).code() == ErrorCode::kTorchIncomplete);
}

#ifdef MAPLOC_CLI_PATH
TEST_CASE("completeness: maploc ls and load list unreferenced storages, --strict exits 3", "[torch][completeness][cli]") {
  const auto dir = std::filesystem::temp_directory_path() / "maploc_completeness_test";
  std::filesystem::create_directories(dir);
  const auto path = dir / "held.pt";
  {
    const Buffer b = held_by_unknown_call();
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  }
  const std::string cli = std::string("'") + MAPLOC_CLI_PATH + "'";
  const Run ls = run_shell(cli + " ls --json " + quoted(path) + " 2>/dev/null");
  REQUIRE(ls.exit_code == 0);
  const auto listed = nlohmann::json::parse(ls.out);
  CHECK(listed["unreferenced_storages"] == nlohmann::json::array({"0"}));
  CHECK(listed["unknown_rebuilds"] == nlohmann::json::array());
  const Run warned = run_shell(cli + " ls " + quoted(path) + " 2>&1");
  CHECK(warned.exit_code == 0);
  CHECK(warned.out.find("maploc: warning:") != std::string::npos);
  CHECK(warned.out.find("unreferenced storages") != std::string::npos);
  const Run load = run_shell(cli + " load --json " + quoted(path) + " --map-location cpu 2>/dev/null");
  REQUIRE(load.exit_code == 0);
  CHECK(nlohmann::json::parse(load.out)["unreferenced_storages"] == nlohmann::json::array({"0"}));
  for (const char* command : {"ls", "load", "plan", "verify"}) {
    INFO(command);
    const Run strict = run_shell(cli + " " + command + " " + quoted(path) + " --strict 2>&1");
    CHECK(strict.exit_code == 3);
    // verify reports problems in words; the others name the error code.
    CHECK(strict.out.find(std::string(command) == "verify" ? "reached by no tensor" : "kTorchIncomplete") !=
          std::string::npos);
  }
  // A complete file passes --strict.
  CHECK(run_shell(cli + " ls --strict " + quoted(checkpoints_dir() / "gpu_tagged.t113.pt") + " >/dev/null").exit_code == 0);
  std::filesystem::remove_all(dir);
}
#endif

}  // namespace maploc::test
