// contract_test.cpp - what the maploc command promises (issue 27, 5): one exit-code table, in the code
// and in docs/cli.md; usage errors all exit 2; output that cannot be written is an error (exit 6);
// OUT naming IN is refused; convert refuses output extensions it does not write.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "exit_codes.h"
#include "run_shell.h"

namespace {

namespace fs = std::filesystem;
using maploc::cli::kExitCodeTable;

using maploc::test::Run;  // stdout and stderr together (or stderr alone, see run_full)
using maploc::test::run_shell;

Run run_cli(const std::string& args) { return run_shell(std::string("'") + MAPLOC_CLI + "' " + args + " 2>&1"); }

// stdout to /dev/full (every write fails with ENOSPC); stderr captured.
Run run_full(const std::string& args) {
  return run_shell(std::string("'") + MAPLOC_CLI + "' " + args + " 2>&1 >/dev/full");
}

std::string fixture(const std::string& rel) { return std::string(MAPLOC_FIXTURES_DIR) + "/" + rel; }

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& tag)
      : path(fs::temp_directory_path() / ("maploc-cli-" + tag + "-" + std::to_string(::getpid()))) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

// Runs maploc with stdout a pipe whose reader is gone; SIGPIPE ignored or not. Returns the wait status.
int run_into_closed_pipe(const std::vector<std::string>& args, bool ignore_sigpipe, std::string& err) {
  int out[2], errp[2];
  REQUIRE(::pipe(out) == 0);
  REQUIRE(::pipe(errp) == 0);
  ::close(out[0]);  // no reader
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::signal(SIGPIPE, ignore_sigpipe ? SIG_IGN : SIG_DFL);
    ::dup2(out[1], STDOUT_FILENO);
    ::dup2(errp[1], STDERR_FILENO);
    ::close(errp[0]);
    std::vector<char*> argv{const_cast<char*>(MAPLOC_CLI)};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(MAPLOC_CLI, argv.data());
    ::_exit(127);
  }
  ::close(out[1]);
  ::close(errp[1]);
  char buf[4096];
  for (ssize_t n; (n = ::read(errp[0], buf, sizeof buf)) > 0;) err.append(buf, static_cast<std::size_t>(n));
  ::close(errp[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

}  // namespace

TEST_CASE("docs/cli.md's exit-code table is the code's table", "[cli][contract]") {
  const std::string doc = slurp(std::string(MAPLOC_SOURCE_DIR) + "/docs/cli.md");
  REQUIRE(!doc.empty());
  const auto at = doc.find("| exit code | meaning |");
  REQUIRE(at != std::string::npos);
  std::map<int, std::string> documented;
  const std::regex row(R"(^\| (\d+) \| (.*) \|$)");
  std::size_t pos = doc.find('\n', doc.find('\n', at) + 1) + 1;  // past the header and |---|---|
  while (pos < doc.size() && doc[pos] == '|') {
    const auto end = doc.find('\n', pos);
    const std::string line = doc.substr(pos, end - pos);
    std::smatch m;
    INFO(line);
    REQUIRE(std::regex_match(line, m, row));
    documented[std::stoi(m[1])] = m[2];
    pos = end + 1;
  }
  std::map<int, std::string> coded;
  for (const auto& r : kExitCodeTable) coded[r.code] = std::string(r.meaning);
  CHECK(documented == coded);
  // `maploc --help` lists every code from the same table.
  const auto help = run_cli("--help");
  for (const auto& r : kExitCodeTable) {
    CHECK(help.out.find(std::to_string(r.code) + " " + std::string(r.word)) != std::string::npos);
  }
}

TEST_CASE("exit_code_for: one decision per error", "[cli][contract]") {
  using maploc::Error, maploc::ErrorCode, maploc::Stage;
  using namespace maploc::cli;
  CHECK(exit_code_for(Error(ErrorCode::kRemapBadSpec, Stage::kRemap, "x")) == kExitUsage);
  CHECK(exit_code_for(Error(ErrorCode::kInvalidArgument, Stage::kCli, "x")) == kExitUsage);
  CHECK(exit_code_for(Error(ErrorCode::kIoWrite, Stage::kIo, "x")) == kExitOutput);
  CHECK(exit_code_for(Error(ErrorCode::kIoNoSpace, Stage::kIo, "x")) == kExitOutput);
  CHECK(exit_code_for(Error(ErrorCode::kIoOpen, Stage::kIo, "x")) == kExitBadFile);
  CHECK(exit_code_for(Error(ErrorCode::kRemapNoSuchDevice, Stage::kRemap, "x")) == kExitMapping);
  CHECK(exit_code_for(Error(ErrorCode::kRemapOutOfMemory, Stage::kRemap, "x")) == kExitDevice);
}

TEST_CASE("every usage error exits 2: flags, SPECs, --slice, ranks, missing arguments", "[cli][contract]") {
  const std::string f = fixture("checkpoints/gpu_tagged.t113.pt");
  for (const std::string& args : std::vector<std::string>{
           "ls " + f + " --bogus", "ls", "ls " + f + " " + f, "remap " + f, "remap " + f + " x.pt",
        "plan " + f + " --map-location gpu", "plan " + f + " --map-location 'cpu,'",
        "plan " + f + " --map-location ',cpu'", "plan " + f + " --map-location 'cuda:0->cpu,,cuda:1->cpu'",
        "plan " + f + " --map-location 'cpu, ,cpu'", "load " + f + " --map-location gpu",
        "load " + f + " --map-location cpu --slice bogus", "load " + f + " --map-location cpu --slice 'rows:*,'",
        "load " + f + " --map-location cpu --slice 'rows:*' --rank 2 --world-size 2",
        "load " + f + " --map-location cpu --rank 0", "load " + f + " --host nope", "convert " + f + " x --to onnx",
        "plan " + f + " --devices cuda:0=lots", "ls " + f + " --limit nope=1"}) {
    INFO(args);
    const Run r = run_cli(args);
    CHECK(r.exit_code == 2);
    CHECK(r.out.find("error") != std::string::npos);
  }
  const Run trailing = run_cli("plan " + f + " --map-location 'cuda:*->cpu,'");
  CHECK(trailing.out.find("item 2") != std::string::npos);
  CHECK(trailing.out.find("trailing comma") != std::string::npos);
}

TEST_CASE("output that cannot be written is an error naming standard output (exit 6)", "[cli][contract]") {
  const std::string f = fixture("checkpoints/gpu_tagged.t113.pt");
  TempDir dir("full");
  const std::string out = (dir.path / "o.pt").string();
  for (const std::string& args : std::vector<std::string>{
           "ls " + f, "ls " + f + " --json", "ls " + f + " --json --hash", "ls " + f + " --records",
        "ls " + f + " --records --json", "dis " + f, "dis " + f + " --json", "plan " + f + " --map-location cpu",
        "plan " + f + " --map-location cpu --json", "load " + f + " --map-location cpu",
        "load " + f + " --map-location cpu --hash --json", "verify " + f, "verify " + f + " --json",
        "remap " + f + " " + out + " --map-location cpu", "remap " + f + " " + out + " --map-location cpu --json",
        "--help", "ls --help", "--version"}) {
    INFO(args);
    const Run r = run_full(args);
    CHECK(r.exit_code == 6);
    CHECK(r.out.find("cannot write standard output: No space left on device") != std::string::npos);
    CHECK(r.out.find("[kIoNoSpace]") != std::string::npos);
  }
  // The command's own error comes first and keeps its code.
  const Run missing = run_full("ls /nonexistent/x.pt");
  CHECK(missing.exit_code == 3);
}

TEST_CASE("a closed pipe: SIGPIPE ends maploc quietly, with SIGPIPE ignored it exits 6", "[cli][contract]") {
  const std::string f = fixture("checkpoints/gpu_tagged.t113.pt");
  std::string err;
  const int killed = run_into_closed_pipe({"ls", f, "--json"}, false, err);
  CHECK(WIFSIGNALED(killed));
  CHECK((WIFSIGNALED(killed) && WTERMSIG(killed) == SIGPIPE));
  CHECK(err.empty());
  err.clear();
  const int ignored = run_into_closed_pipe({"ls", f, "--json"}, true, err);
  REQUIRE(WIFEXITED(ignored));
  CHECK(WEXITSTATUS(ignored) == 6);
  CHECK(err.find("cannot write standard output: Broken pipe") != std::string::npos);
}

TEST_CASE("remap and convert refuse an OUT that is IN, by any spelling or link, and IN is untouched", "[cli][contract]") {
  TempDir dir("same");
  const fs::path in = dir.path / "in.pt";
  fs::copy_file(fixture("checkpoints/gpu_tagged.t113.pt"), in);
  fs::create_directories(dir.path / "sub");
  fs::create_symlink(in, dir.path / "link.pt");
  fs::create_hard_link(in, dir.path / "hard.pt");
  const std::string bytes = slurp(in);
  const std::string p = dir.path.string();
  for (const std::string& out : std::vector<std::string>{in.string(), p + "/sub/../in.pt", p + "/./in.pt", p + "/link.pt", p + "/hard.pt"}) {
    INFO(out);
    const Run remap = run_cli("remap '" + in.string() + "' '" + out + "' --map-location 'cuda:*->cpu'");
    CHECK(remap.exit_code == 2);
    CHECK(remap.out.find("is the input") != std::string::npos);
    const Run convert = run_cli("convert '" + in.string() + "' '" + out + "'");
    CHECK(convert.exit_code == 2);
    CHECK(convert.out.find("is the input") != std::string::npos);
    CHECK(slurp(in) == bytes);
  }
  // Through the link as IN, OUT the file itself.
  CHECK(run_cli("remap '" + p + "/link.pt' '" + in.string() + "' --map-location 'cuda:*->cpu'").exit_code == 2);
  // safetensors to itself.
  const std::string st = p + "/a.safetensors";
  REQUIRE(run_cli("convert '" + in.string() + "' '" + st + "' --quiet").exit_code == 0);
  const std::string st_bytes = slurp(st);
  CHECK(run_cli("convert '" + st + "' '" + st + "'").exit_code == 2);
  CHECK(slurp(st) == st_bytes);
  CHECK(slurp(in) == bytes);
  // A different OUT is still fine.
  CHECK(run_cli("remap '" + in.string() + "' '" + p + "/out.pt' --map-location 'cuda:*->cpu' --quiet").exit_code == 0);
}

TEST_CASE("convert refuses an OUT extension it does not write and says which it does", "[cli][contract]") {
  TempDir dir("ext");
  const std::string in = fixture("checkpoints/gpu_tagged.t113.pt");
  const std::string p = dir.path.string();
  for (const std::string out : {"x.onnx", "x.txt", "x", "x.safetensors.tmp"}) {
    INFO(out);
    const Run r = run_cli("convert " + in + " '" + p + "/" + out + "'");
    CHECK(r.exit_code == 2);
    CHECK(r.out.find(".safetensors (safetensors), .pt, .pth, .bin, .ckpt (torch)") != std::string::npos);
    CHECK(!fs::exists(p + "/" + out));
  }
  CHECK(run_cli("convert " + in + " '" + p + "/x.safetensors' --to torch").exit_code == 2);  // --to contradicts OUT
  CHECK(run_cli("convert " + in + " '" + p + "/x.weights' --to torch --quiet").exit_code == 0);  // --to decides
  CHECK(run_cli("convert " + in + " '" + p + "/x.pth' --quiet").exit_code == 0);
  CHECK(run_cli("convert " + in + " '" + p + "/x.safetensors' --quiet").exit_code == 0);
}
