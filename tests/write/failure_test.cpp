// failure_test.cpp - a failed write leaves no partial output: missing folder, full disk (RLIMIT_FSIZE), corrupt input; CLI exit codes.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "support/atomic_file.h"
#include "maploc/torch/safetensors.h"
#include "maploc/torch/write.h"
#include "write/write_test_util.h"

using namespace maploc;

namespace {

const auto kBig = test::checkpoints_dir() / "shufflenet_v2_x0_5.t113.pt";  // ~5 MB

// Runs f in a child whose files may not grow past `limit` bytes (SIGXFSZ
// ignored, so write(2) fails with EFBIG instead of killing it); returns
// the ErrorCode it raised as the exit status (0 when it raised nothing).
int code_under_fsize_limit(rlim_t limit, const std::function<void()>& f) {
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::signal(SIGXFSZ, SIG_IGN);
    rlimit rl{limit, limit};
    if (::setrlimit(RLIMIT_FSIZE, &rl) != 0) ::_exit(255);
    int status = 0;
    try {
      f();
    } catch (const Error& e) {
      status = static_cast<int>(e.code()) & 0xFF;
    }
    ::_exit(status);
  }
  int st = 0;
  REQUIRE(::waitpid(pid, &st, 0) == pid);
  REQUIRE(WIFEXITED(st));
  return WEXITSTATUS(st);
}

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

int run_cli(const std::string& args) {
  const int st = std::system((std::string(MAPLOC_CLI) + " " + args + " >/dev/null 2>&1").c_str());
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

}  // namespace

TEST_CASE("output in a folder that does not exist: kIoOpen, nothing created", "[torch][malformed]") {
  test::TempDir dir("nodir");
  const auto in = torch::Checkpoint::open(test::checkpoints_dir() / "gpu_tagged.t113.pt");
  const auto out = dir.path / "missing" / "out.pt";
  CHECK(test::code_of([&] { torch::save_archive(in, out); }) == ErrorCode::kIoOpen);
  CHECK(test::code_of([&] { torch::save_safetensors(in, out); }) == ErrorCode::kIoOpen);
  CHECK_FALSE(std::filesystem::exists(dir.path / "missing"));
}

TEST_CASE("disk full (RLIMIT_FSIZE): kIoNoSpace, no partial output, an old output untouched", "[torch][limits]") {
  REQUIRE(std::filesystem::file_size(kBig) > 100000);
  test::TempDir dir("full");
  const auto in = torch::Checkpoint::open(kBig);
  const auto out = dir.path / "out.pt";
  CHECK(code_under_fsize_limit(64 * 1024, [&] { torch::save_archive(in, out); }) ==
        static_cast<int>(ErrorCode::kIoNoSpace));
  CHECK(dir.listing().empty());
  CHECK(code_under_fsize_limit(64 * 1024, [&] { torch::save_safetensors(in, dir.path / "o.safetensors"); }) ==
        static_cast<int>(ErrorCode::kIoNoSpace));
  CHECK(dir.listing().empty());
  { std::ofstream(out) << "old"; }
  CHECK(code_under_fsize_limit(64 * 1024, [&] { torch::save_archive(in, out); }) ==
        static_cast<int>(ErrorCode::kIoNoSpace));
  CHECK(slurp(out) == "old");
  CHECK(dir.listing() == std::vector<std::string>{"out.pt"});
  // Without the limit the same write succeeds and replaces it.
  torch::save_archive(in, out);
  CHECK(torch::Checkpoint::open(out).tensors().size() == in.tensors().size());
}

TEST_CASE("AtomicFile discards its temporary file unless committed", "[torch]") {
  test::TempDir dir("atomic");
  {
    auto f = AtomicFile::create(dir.path / "x");
    const std::uint8_t b[3] = {1, 2, 3};
    f.write(b);
    CHECK(std::filesystem::exists(f.temp_path()));
  }
  CHECK(dir.listing().empty());
  auto f = AtomicFile::create(dir.path / "x");
  f.commit();
  CHECK(dir.listing() == std::vector<std::string>{"x"});
}

TEST_CASE("CLI: remap/convert/verify exit codes and no partial OUT", "[cli]") {
  test::TempDir dir("cli");
  const std::string fx = test::checkpoints_dir().string() + "/";
  const std::string d = dir.path.string() + "/";
  CHECK(run_cli("remap " + fx + "gpu_tagged.t113.pt " + d + "a.pt --map-location 'cuda:*->cpu'") == 0);
  CHECK(run_cli("verify " + d + "a.pt") == 0);
  CHECK(run_cli("convert " + d + "a.pt " + d + "a.safetensors") == 0);
  CHECK(run_cli("convert " + d + "a.safetensors " + d + "b.pt") == 0);
  CHECK(run_cli("verify " + d + "b.pt") == 0);
  // meta is a placement, not a tag a file can carry.
  CHECK(run_cli("remap " + fx + "gpu_tagged.t113.pt " + d + "m.pt --map-location meta") == 4);
  // A corrupt input: a cut copy.
  {
    const std::string all = slurp(fx + "gpu_tagged.t113.pt");
    std::ofstream(d + "cut.pt", std::ios::binary) << all.substr(0, all.size() / 2);
  }
  CHECK(run_cli("remap " + d + "cut.pt " + d + "c.pt --map-location cpu") == 3);
  CHECK(run_cli("verify " + d + "cut.pt") == 3);
  CHECK(run_cli("remap " + fx + "gpu_tagged.t113.pt " + d + "nowhere/x.pt --map-location cpu") == 6);  // OUT unwritable
  CHECK(dir.listing() == std::vector<std::string>{"a.pt", "a.safetensors", "b.pt", "cut.pt"});
}
