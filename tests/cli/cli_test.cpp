// cli_test.cpp - the maploc command line as a user runs it: exit codes, messages, dis output.
#include <catch2/catch.hpp>

#include <sys/wait.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "maploc/remap/device.h"
#include "run_shell.h"

namespace {

namespace fs = std::filesystem;

using maploc::test::Run;

// Runs the maploc binary with `args` (already shell-quoted where needed), stdout and stderr together.
Run run_cli(const std::string& args) {
  return maploc::test::run_shell(std::string("'") + MAPLOC_CLI + "' " + args + " 2>&1");
}

std::string fixture(const std::string& rel) { return std::string(MAPLOC_FIXTURES_DIR) + "/" + rel; }

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

TEST_CASE("version and help flags exit 0, no command is a usage error", "[cli]") {
  CHECK(run_cli("--version").exit_code == 0);
  CHECK(run_cli("--version").out.rfind("maploc ", 0) == 0);
  CHECK(run_cli("--help").exit_code == 0);
  CHECK(run_cli("").exit_code == 2);
  CHECK(run_cli("frobnicate x").exit_code == 2);
  CHECK(run_cli("ls").exit_code == 2);
}

TEST_CASE("every command has --help, unknown options are usage errors", "[cli]") {
  for (const char* command : {"ls", "dis", "plan", "load", "remap", "convert", "verify"}) {
    INFO(command);
    auto help = run_cli(std::string(command) + " --help");
    CHECK(help.exit_code == 0);
    CHECK(help.out.rfind(std::string("usage: maploc ") + command, 0) == 0);
    CHECK(run_cli(std::string("help ") + command).out == help.out);
    auto typo = run_cli(std::string(command) + " x --map_location cpu");
    CHECK(typo.exit_code == 2);
    CHECK(typo.out.find("unknown option --map_location") != std::string::npos);
  }
  CHECK(run_cli("load x --map-location").exit_code == 2);  // a value option without its value
}

TEST_CASE("a missing file exits 3 and names the file", "[cli]") {
  auto r = run_cli("ls /nonexistent/model.pt");
  CHECK(r.exit_code == 3);
  CHECK(r.out.find("/nonexistent/model.pt") != std::string::npos);
}

TEST_CASE("a web page saved as a checkpoint is called what it is", "[cli]") {
  const fs::path page = fs::temp_directory_path() / "maploc_cli_page.pt";
  { std::ofstream(page) << "<!DOCTYPE html>\n<html><head><title>Sign in</title></head></html>\n"; }
  auto r = run_cli("ls '" + page.string() + "'");
  CHECK(r.exit_code == 3);
  CHECK(r.out.find("HTML page") != std::string::npos);
  fs::remove(page);
}

TEST_CASE("ls shows the demo checkpoint's tensors and tags, --records its zip records", "[cli]") {
  auto r = run_cli("ls " + fixture("checkpoints/gpu_tagged.t113.pt"));
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("0.weight") != std::string::npos);
  CHECK(r.out.find("cuda:1") != std::string::npos);
  auto records = run_cli("ls --records " + fixture("checkpoints/gpu_tagged.t113.pt"));
  CHECK(records.exit_code == 0);
  CHECK(records.out.find("gpu_tagged.t113/data.pkl") != std::string::npos);
}

TEST_CASE("plan and load map the cuda-tagged demo onto the CPU, without a map it fails with exit 4", "[cli]") {
  const std::string file = fixture("checkpoints/gpu_tagged.t113.pt");
  auto plan = run_cli("plan " + file + " --map-location 'cuda:*->cpu'");
  CHECK(plan.exit_code == 0);
  CHECK(plan.out.find("cuda:1     -> cpu") != std::string::npos);
  auto load = run_cli("load " + file + " --map-location cpu --hash");
  CHECK(load.exit_code == 0);
  std::ifstream in(file + ".manifest.json");
  const auto manifest = nlohmann::json::parse(in);
  for (const auto& t : manifest["tensors"]) {
    const std::string line = t["sha256"].get<std::string>() + "  " + t["name"].get<std::string>();
    CHECK(load.out.find(line) != std::string::npos);
  }
  // Without a map the storages go back to cuda:0 and cuda:1: fine with two GPUs, exit 4 otherwise.
  auto unmapped = run_cli("load " + file);
  const int gpus = maploc::remap::DeviceInventory::probe().cuda_device_count;
  if (gpus >= 2) {
    CHECK(unmapped.exit_code == 0);
  } else {
    CHECK(unmapped.exit_code == 4);
    CHECK(unmapped.out.find(gpus == 0 ? "is tagged cuda:0 but CUDA is not available" : "only 1 CUDA device(s)") !=
          std::string::npos);
  }
  CHECK(run_cli("load " + file + " --map-location gpu").exit_code == 2);  // a SPEC that does not parse: usage
}

TEST_CASE("plan --devices plans for a machine this is not, and says per device whether it fits", "[cli]") {
  const std::string file = fixture("checkpoints/gpu_tagged.t113.pt");  // 848 bytes, on cuda:0 and cuda:1
  auto both = run_cli("plan " + file + " --devices cuda:0=80GiB,cuda:1=80GiB");
  CHECK(both.exit_code == 0);
  CHECK(both.out.find("(free 80.0 GiB: fits)") != std::string::npos);
  auto tight = run_cli("plan " + file + " --map-location 'cuda:*->cuda:1' --devices cuda:0=1GiB,cuda:1=512B --json");
  CHECK(tight.exit_code == 5);  // kRemapOutOfMemory
  CHECK(tight.out.find("\"fits\": false") != std::string::npos);
  CHECK(tight.out.find("but only 512 bytes are free") != std::string::npos);
  auto missing = run_cli("plan " + file + " --devices cuda:0=80GiB");
  CHECK(missing.exit_code == 4);
  CHECK(missing.out.find("only 1 CUDA device(s) are present (cuda:0)") != std::string::npos);
  CHECK(run_cli("plan " + file + " --devices cuda:1=80GiB").exit_code == 2);
  CHECK(run_cli("plan " + file + " --devices cuda:0=lots").exit_code == 2);
}

// Residency itself (mincore, pagemap) is checked in tests/remap/populate_test.cpp.
TEST_CASE("load --populate says it populated the views, changes no byte and needs --host view", "[cli]") {
  const std::string file = fixture("checkpoints/gpu_tagged.t113.pt");
  std::ifstream in(file + ".manifest.json");
  const auto manifest = nlohmann::json::parse(in);
  for (const std::string extra : {"--populate", "--populate --writable"}) {
    auto load = run_cli("load " + file + " --map-location cpu --hash " + extra);
    CHECK(load.exit_code == 0);
    CHECK(load.out.find("every page populated") != std::string::npos);
    for (const auto& t : manifest["tensors"]) {
      CHECK(load.out.find(t["sha256"].get<std::string>() + "  " + t["name"].get<std::string>()) != std::string::npos);
    }
  }
  auto copy = run_cli("load " + file + " --map-location cpu --host copy --populate");
  CHECK(copy.exit_code == 2);
  CHECK(copy.out.find("--populate") != std::string::npos);
}

TEST_CASE("dis of every checkpoint equals pickletools' disassembly", "[cli][pickle]") {
  const fs::path goldens = fixture("pickle/dis");
  REQUIRE(fs::exists(goldens));
  int compared = 0;
  for (const auto& e : fs::directory_iterator(goldens)) {
    if (e.path().extension() != ".dis") continue;
    const std::string name = e.path().stem().string();  // "<fixture file>"
    const fs::path checkpoint = fixture("checkpoints/" + name);
    if (!fs::exists(checkpoint)) continue;
    INFO(name);
    auto r = run_cli("dis '" + checkpoint.string() + "'");
    CHECK(r.exit_code == 0);
    CHECK(r.out == slurp(e.path()));
    ++compared;
  }
  CHECK(compared >= 20);
}

TEST_CASE("dis with --record picks a record, a record that is no pickle is a clear error", "[cli][pickle]") {
  const std::string file = fixture("checkpoints/nested_training.t113.pt");
  auto pkl = run_cli("dis " + file + " --record data.pkl");
  CHECK(pkl.exit_code == 0);
  CHECK(pkl.out.find("STOP") != std::string::npos);
  CHECK(run_cli("dis " + file + " --record nested_training.t113/data.pkl").out == pkl.out);
  auto missing = run_cli("dis " + file + " --record nope.pkl");
  CHECK(missing.exit_code == 3);
  CHECK(missing.out.find("nope.pkl") != std::string::npos);
  auto version = run_cli("dis " + file + " --record version");
  CHECK(version.exit_code == 3);
  CHECK(version.out.find("pickle:") != std::string::npos);
}

TEST_CASE("dis --json lists the same opcodes as the text", "[cli][pickle]") {
  const std::string file = fixture("checkpoints/legacy_state_dict.t113.pt");
  auto text = run_cli("dis " + file);
  auto json = run_cli("dis " + file + " --json");
  REQUIRE(json.exit_code == 0);
  const auto j = nlohmann::json::parse(json.out);
  REQUIRE(j["pickles"].size() == 5);
  std::size_t opcodes = 0;
  for (const auto& p : j["pickles"]) {
    opcodes += p["opcodes"].size();
    CHECK(p["opcodes"].back()["name"] == "STOP");
  }
  std::size_t lines = 0;
  for (char c : text.out) lines += c == '\n';
  CHECK(opcodes + 5 == lines);  // each pickle's text adds its "highest protocol" line
  CHECK(j["pickles"][1]["start"] == j["pickles"][0]["end"]);
}

TEST_CASE("the limit option raises or lowers a Limits field by the name its errors use", "[cli][limits]") {
  const std::string file = fixture("checkpoints/nested_training.t113.pt");
  auto low = run_cli("ls " + file + " --limit zip_max_entries=3");
  CHECK(low.exit_code == 3);
  CHECK(low.out.find("raise Limits::zip_max_entries") != std::string::npos);
  CHECK(run_cli("ls " + file + " --limit Limits::zip_max_entries=100000").exit_code == 0);
  CHECK(run_cli("ls " + file + " --limit no_such_limit=1").exit_code == 2);
  CHECK(run_cli("ls " + file + " --limit zip_max_entries=-1").exit_code == 2);
  CHECK(run_cli("ls " + file + " --limit zip_max_entries").exit_code == 2);
}
