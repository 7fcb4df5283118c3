// cli_test.cpp - the maploc command line as a user runs it: exit codes, messages, dis output.
#include <catch2/catch.hpp>

#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace {

namespace fs = std::filesystem;

struct Run {
  int exit_code;
  std::string out;  // stdout and stderr together
};

// Runs the maploc binary with `args` (already shell-quoted where needed).
Run maploc(const std::string& args) {
  const std::string cmd = std::string("'") + MAPLOC_CLI + "' " + args + " 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::string out;
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, pipe)) > 0;) out.append(buf, n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

std::string fixture(const std::string& rel) { return std::string(MAPLOC_FIXTURES_DIR) + "/" + rel; }

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

TEST_CASE("--version and --help exit 0, no command is a usage error", "[cli]") {
  CHECK(maploc("--version").exit_code == 0);
  CHECK(maploc("--version").out.rfind("maploc ", 0) == 0);
  CHECK(maploc("--help").exit_code == 0);
  CHECK(maploc("").exit_code == 2);
  CHECK(maploc("frobnicate x").exit_code == 2);
  CHECK(maploc("ls").exit_code == 2);
}

TEST_CASE("a missing file exits 3 and names the file", "[cli]") {
  auto r = maploc("ls /nonexistent/model.pt");
  CHECK(r.exit_code == 3);
  CHECK(r.out.find("/nonexistent/model.pt") != std::string::npos);
}

TEST_CASE("a web page saved as a checkpoint is called what it is", "[cli]") {
  const fs::path page = fs::temp_directory_path() / "maploc_cli_page.pt";
  { std::ofstream(page) << "<!DOCTYPE html>\n<html><head><title>Sign in</title></head></html>\n"; }
  auto r = maploc("ls '" + page.string() + "'");
  CHECK(r.exit_code == 3);
  CHECK(r.out.find("HTML page") != std::string::npos);
  fs::remove(page);
}

TEST_CASE("ls shows the records of the demo checkpoint", "[cli]") {
  auto r = maploc("ls " + fixture("checkpoints/gpu_tagged.t113.pt"));
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("data.pkl") != std::string::npos);
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
    auto r = maploc("dis '" + checkpoint.string() + "'");
    CHECK(r.exit_code == 0);
    CHECK(r.out == slurp(e.path()));
    ++compared;
  }
  CHECK(compared >= 20);
}

TEST_CASE("dis --record picks a record; a record that is no pickle is a clear error", "[cli][pickle]") {
  const std::string file = fixture("checkpoints/nested_training.t113.pt");
  auto pkl = maploc("dis " + file + " --record data.pkl");
  CHECK(pkl.exit_code == 0);
  CHECK(pkl.out.find("STOP") != std::string::npos);
  CHECK(maploc("dis " + file + " --record nested_training.t113/data.pkl").out == pkl.out);
  auto missing = maploc("dis " + file + " --record nope.pkl");
  CHECK(missing.exit_code == 3);
  CHECK(missing.out.find("nope.pkl") != std::string::npos);
  auto version = maploc("dis " + file + " --record version");
  CHECK(version.exit_code == 3);
  CHECK(version.out.find("pickle:") != std::string::npos);
}
