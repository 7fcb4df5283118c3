// set_cli_test.cpp - the CLI's ls, plan, load and verify take an index file or a directory.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>

#include "run_shell.h"
#include "sharded/sharded_test_util.h"

#ifdef MAPLOC_CLI_PATH
namespace {

using maploc::test::Run;

Run run_cli(const std::string& args) { return maploc::test::run_shell(std::string("'") + MAPLOC_CLI_PATH + "' " + args); }

std::string quoted(const std::filesystem::path& p) { return "'" + p.string() + "'"; }

}  // namespace

TEST_CASE("maploc ls --json --hash of a set directory and index agree with torch", "[cli][sharded]") {
  for (const std::string set : {"st_set", "mixed_set"}) {
    const auto manifest = maploc::test::set_manifest(set);
    for (const auto& path : {maploc::test::sharded_dir() / set,
                             maploc::test::sharded_dir() / set / manifest["index"].get<std::string>()}) {
      INFO(path);
      const Run r = run_cli("ls --json --hash " + quoted(path));
      REQUIRE(r.exit_code == 0);
      const auto out = nlohmann::json::parse(r.out);
      CHECK(out["format"] == "set");
      CHECK(out["metadata"]["total_size"] == std::to_string(manifest["total_size"].get<std::uint64_t>()));
      std::map<std::string, nlohmann::json> mine;
      for (const auto& t : out["tensors"]) mine[t["name"].get<std::string>()] = t;
      REQUIRE(mine.size() == manifest["tensors"].size());
      for (const auto& t : manifest["tensors"]) {
        const auto& x = mine[t["name"].get<std::string>()];
        CHECK(x["sha256"] == t["sha256"]);
        CHECK(x["shape"] == t["shape"]);
      }
      for (const auto& s : out["storages"]) CHECK(s.contains("file"));
    }
  }
}

TEST_CASE("maploc plan, load and verify take a set, broken sets exit 3 naming the problem", "[cli][sharded]") {
  const auto dir = quoted(maploc::test::sharded_dir() / "bin_set");
  CHECK(run_cli("plan " + dir + " --map-location cpu").exit_code == 0);
  const Run load = run_cli("load " + dir + " --map-location cpu --hash");
  CHECK(load.exit_code == 0);
  const auto manifest = maploc::test::set_manifest("bin_set");  // named: a temporary's subobject would dangle
  for (const auto& t : manifest["tensors"]) {
    CHECK(load.out.find(t["sha256"].get<std::string>() + "  " + t["name"].get<std::string>()) != std::string::npos);
  }
  const Run ok = run_cli("verify " + dir);
  CHECK(ok.exit_code == 0);
  CHECK(ok.out.find("OK (set)") != std::string::npos);
  const Run bad = run_cli("verify " + quoted(maploc::test::sharded_dir() / "bad_missing_tensor") + " 2>&1");
  CHECK(bad.exit_code == 3);
  CHECK(bad.out.find("ghost.weight") != std::string::npos);
  const Run ls_bad = run_cli("ls " + quoted(maploc::test::sharded_dir() / "bad_missing_file") + " 2>&1");
  CHECK(ls_bad.exit_code == 3);
  CHECK(ls_bad.out.find("kTorchBadSet") != std::string::npos);
  const Run warn = run_cli("ls " + quoted(maploc::test::sharded_dir() / "bad_unmapped_tensor") + " 2>&1 >/dev/null");
  CHECK(warn.exit_code == 0);
  CHECK(warn.out.find("maploc: warning: tensor 'norm.weight'") != std::string::npos);
}

TEST_CASE("maploc remap and convert take a set or a DCP directory, and write torch's values", "[cli][sharded]") {
  const auto out_dir = std::filesystem::temp_directory_path() / ("maploc_set_cli_" + std::to_string(::getpid()));
  std::filesystem::create_directories(out_dir);
  for (const std::string set : {"st_set", "mixed_set", "bin_set", "dcp_two", "dcp_safetensors", "dcp_ranks"}) {
    const auto manifest = maploc::test::set_manifest(set);
    const auto in = quoted(maploc::test::sharded_dir() / set);
    const auto pth = out_dir / (set + ".pth");
    const auto st = out_dir / (set + ".safetensors");
    INFO(set);
    REQUIRE(run_cli("remap " + in + " " + quoted(pth) + " --map-location cpu --quiet").exit_code == 0);
    REQUIRE(run_cli("convert " + in + " " + quoted(st) + " --quiet").exit_code == 0);
    for (const auto& written : {pth, st}) {
      INFO(written);
      const Run r = run_cli("ls --json --hash " + quoted(written));
      REQUIRE(r.exit_code == 0);
      std::map<std::string, std::string> hashes;
      const auto listing = nlohmann::json::parse(r.out);  // named: a temporary's subobject would dangle
      for (const auto& t : listing["tensors"]) hashes[t["name"]] = t["sha256"];
      CHECK(hashes.size() == manifest["tensors"].size());
      for (const auto& t : manifest["tensors"]) CHECK(hashes[t["name"].get<std::string>()] == t["sha256"].get<std::string>());
    }
  }
  std::filesystem::remove_all(out_dir);
}
#endif
