// moto_test.cpp - s3:// URLs against a real S3-compatible server: moto in server mode
// (tests/remote/moto_s3.py, moto[server] and boto3 from .cache/safetensors-venv, made by
// tools/install-deps.sh test). moto authenticates every request once the fixtures are set up: its
// own SigV4 check of maploc's signatures (curl's CURLOPT_AWS_SIGV4), an IAM user's keys and a
// role's temporary credentials (a session token), and its own If-Match handling of the ETag pin.
// Without the venv or moto the tests FAIL, saying what to run; they never skip (docs/remote.md).
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "maploc/error.h"
#include "maploc/remap/loaded.h"
#include "maploc/torch/checkpoint.h"
#include "maploc/torch/hash.h"
#include "maploc/torch/verify.h"
#include "remote/remote_checks.h"
#include "run_shell.h"

using namespace maploc;

namespace {

using test::kFixtures;
const std::string kBucket = "maploc-fixtures";
const std::string kRegion = "eu-west-3";

const std::vector<std::string> kObjects = {
    "checkpoints/shufflenet_v2_x0_5.t113.pt",  // zip, torch 1.13, 338 storages
    "checkpoints/large_storages.t113.pt",      // 8 MB: uploaded in two parts (a multipart ETag)
    "checkpoints/dtypes.t2x.pt",               // zip, torch 2.x
    "checkpoints/dtypes_legacy.t113.pt",       // legacy (pre-1.6): read in full
    "safetensors/dtypes.safetensors",
    "sharded/st_set/model.safetensors.index.json",
    "sharded/st_set/model-00001-of-00003.safetensors",
    "sharded/st_set/model-00002-of-00003.safetensors",
    "sharded/st_set/model-00003-of-00003.safetensors",
};

/// moto_s3.py under the venv's python: started once per test process, killed at exit.
class MotoServer {
 public:
  MotoServer() {
    std::error_code ec;
    if (!std::filesystem::exists(MAPLOC_MOTO_PYTHON, ec)) {
      FAIL("no " MAPLOC_MOTO_PYTHON ": the s3 tests run moto from that venv; run bash tools/install-deps.sh test "
           "(or configure with -DMAPLOC_MOTO_PYTHON=<a python with moto[server] and boto3>)");
    }
    int in[2], out[2];
    REQUIRE(::pipe(in) == 0);
    REQUIRE(::pipe(out) == 0);
    pid_ = ::fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      ::dup2(in[0], 0);
      ::dup2(out[1], 1);
      for (int fd : {in[0], in[1], out[0], out[1]}) ::close(fd);
      std::vector<std::string> args = {MAPLOC_MOTO_PYTHON, MAPLOC_MOTO_S3, kFixtures, kBucket, kRegion};
      args.insert(args.end(), kObjects.begin(), kObjects.end());
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(MAPLOC_MOTO_PYTHON, argv.data());
      std::perror("exec " MAPLOC_MOTO_PYTHON);
      ::_exit(127);
    }
    ::close(in[0]);
    ::close(out[1]);
    to_ = ::fdopen(in[1], "w");
    from_ = ::fdopen(out[0], "r");
    REQUIRE((to_ != nullptr && from_ != nullptr));
    const std::string first = line();
    INFO("moto_s3.py under " MAPLOC_MOTO_PYTHON " said: '" << first << "'");
    if (first.rfind("PORT ", 0) != 0) {
      FAIL("moto did not start: run bash tools/install-deps.sh test (moto[server] and boto3 into "
           ".cache/safetensors-venv)");
    }
    std::istringstream words(first.substr(5));
    words >> port_ >> key_id >> secret >> temp_key_id >> temp_secret >> session_token;
    REQUIRE(!session_token.empty());
  }
  ~MotoServer() {
    if (to_ != nullptr) std::fclose(to_);
    if (from_ != nullptr) std::fclose(from_);
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  MotoServer(const MotoServer&) = delete;
  MotoServer& operator=(const MotoServer&) = delete;

  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }
  /// Replaces object `key` with the file at `path` (a new ETag); "OK" or "ERROR ...".
  std::string put(const std::string& key, const std::string& path) {
    std::fprintf(to_, "put %s %s\n", key.c_str(), path.c_str());
    std::fflush(to_);
    return line();
  }

  std::string key_id, secret, temp_key_id, temp_secret, session_token;

 private:
  std::string line() {
    std::string s;
    for (int c; (c = std::fgetc(from_)) != EOF && c != '\n';) s += static_cast<char>(c);
    return s;
  }
  pid_t pid_ = -1;
  int port_ = 0;
  FILE* to_ = nullptr;
  FILE* from_ = nullptr;
};

MotoServer& moto() {
  static MotoServer s;
  return s;
}

/// Sets the AWS variables for one test and restores every one it touched afterwards.
class AwsEnv {
 public:
  AwsEnv() {
    for (const char* n : kNames) {
      const char* v = std::getenv(n);
      saved_.emplace_back(n, v == nullptr ? std::nullopt : std::optional<std::string>(v));
      ::unsetenv(n);
    }
    // Nothing of the user's own ~/.aws: the files are named and absent.
    set("AWS_CONFIG_FILE", "/nonexistent/maploc-test/config");
    set("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/maploc-test/credentials");
    set("AWS_ENDPOINT_URL", moto().endpoint());
    set("AWS_REGION", kRegion);
    set("AWS_ACCESS_KEY_ID", moto().key_id);
    set("AWS_SECRET_ACCESS_KEY", moto().secret);
  }
  ~AwsEnv() {
    for (const auto& [n, v] : saved_) {
      if (v) ::setenv(n, v->c_str(), 1);
      else ::unsetenv(n);
    }
  }
  static void set(const char* name, const std::string& value) { ::setenv(name, value.c_str(), 1); }

 private:
  static constexpr const char* kNames[] = {
      "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ACCESS_KEY_ID",
      "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"};
  std::vector<std::pair<const char*, std::optional<std::string>>> saved_;
};

std::string s3(const std::string& key) { return "s3://" + kBucket + "/" + key; }

using test::hashes;
using test::raised;

torch::Options quick(unsigned retries = 2) { return test::with_retries(retries); }

/// No credential of the server's in `text`.
void check_no_secret(const std::string& text) {
  for (const std::string* s : {&moto().secret, &moto().temp_secret, &moto().session_token}) {
    CHECK(text.find(*s) == std::string::npos);
  }
}

}  // namespace

TEST_CASE("moto: s3:// objects read signed from a real S3 server hash as the local files", "[remote][moto]") {
  AwsEnv env;
  for (const std::string& f : kObjects) {
    if (f.find("/st_set/") != std::string::npos) continue;  // read as a set below
    INFO(f);
    const auto local = torch::Checkpoint::open(kFixtures + "/" + f);
    const auto remote = torch::Checkpoint::open(s3(f), quick());
    CHECK(remote.path() == s3(f));
    CHECK(remote.format() == local.format());
    CHECK(hashes(remote) == hashes(local));
    REQUIRE(remote.remote_transfer().has_value());
    CHECK(remote.remote_transfer()->object_bytes == std::filesystem::file_size(kFixtures + "/" + f));
  }
  // remap::load of the s3 URL places the same bytes as the local load.
  for (const std::string f : {"checkpoints/shufflenet_v2_x0_5.t113.pt", "checkpoints/large_storages.t113.pt"}) {
    INFO(f);
    remap::LoadOptions lo;
    lo.map = remap::MapLocation::all_to("cpu");
    lo.host = remap::HostMemory::kOwnedCopy;
    const auto a = remap::load(torch::Checkpoint::open(kFixtures + "/" + f), lo);
    const auto b = remap::load(torch::Checkpoint::open(s3(f), quick()), lo);
    REQUIRE(a.tensors().size() == b.tensors().size());
    for (std::size_t i = 0; i < a.tensors().size(); ++i) CHECK(a.tensor_sha256(i) == b.tensor_sha256(i));
  }
  // A sharded set's index: its shards by their s3 URLs beside it; verify checks every shard.
  const std::string index = "sharded/st_set/model.safetensors.index.json";
  const auto set = torch::Checkpoint::open(s3(index), quick());
  REQUIRE(set.format() == torch::Format::kSet);
  CHECK(set.members().size() == 3);
  CHECK(set.members().front().path == s3("sharded/st_set/model-00001-of-00003.safetensors"));
  set.prefetch();
  CHECK(hashes(set) == hashes(torch::Checkpoint::open(kFixtures + "/" + index)));
  const auto report = torch::verify(s3(index));
  INFO((report.problems.empty() ? std::string() : report.problems.front()));
  CHECK(report.ok());
  // The same checks as the local index's, and each object (the index, each shard) fetched once.
  std::vector<std::string> checks, reads;
  for (const auto& c : report.checks) (c.find("read by URL: ") == std::string::npos ? checks : reads).push_back(c);
  CHECK(checks == torch::verify(kFixtures + "/" + index).checks);
  CHECK(report.warnings == torch::verify(kFixtures + "/" + index).warnings);
  REQUIRE(reads.size() == 4);
  for (const auto& line : reads) {
    INFO(line);
    unsigned long long read = 0, size = 0;
    REQUIRE(std::sscanf(line.substr(line.find("read by URL: ")).c_str(), "read by URL: %llu bytes for %llu", &read,
                        &size) == 2);
    CHECK(read == size);
  }
  // A file larger than the first request's tail: its tail, its head, then the rest; no byte twice.
  const std::string large = "checkpoints/large_storages.t113.pt";
  const auto large_report = torch::verify(s3(large));
  CHECK(large_report.ok());
  const auto large_bytes = std::to_string(std::filesystem::file_size(kFixtures + "/" + large));
  CHECK(large_report.checks.back().rfind("read by URL: " + large_bytes + " bytes for " + large_bytes + " in ", 0) == 0);
  // The same keys through the CLI; nothing secret in what it prints.
  const std::string cli = std::string("'") + MAPLOC_CLI + "' ";
  const auto load = test::run_shell(cli + "load --json --hash '" + s3(kObjects[0]) + "' 2>&1");
  CHECK(load.exit_code == 0);
  CHECK(load.out.find("\"remote\"") != std::string::npos);
  check_no_secret(load.out);
  const auto verified = test::run_shell(cli + "verify '" + s3(index) + "' 2>&1");
  INFO(verified.out);
  CHECK(verified.exit_code == 0);
  check_no_secret(verified.out);
  // A role's temporary credentials: moto checks the session token with the signature.
  AwsEnv::set("AWS_ACCESS_KEY_ID", moto().temp_key_id);
  AwsEnv::set("AWS_SECRET_ACCESS_KEY", moto().temp_secret);
  AwsEnv::set("AWS_SESSION_TOKEN", moto().session_token);
  CHECK(hashes(torch::Checkpoint::open(s3(kObjects[0]), quick())) ==
        hashes(torch::Checkpoint::open(kFixtures + "/" + kObjects[0])));
}

TEST_CASE("moto: a missing key or a wrong secret or a replaced object is an error naming the s3 URL", "[remote][moto]") {
  AwsEnv env;
  // A key the bucket lacks: 404, kRemoteRequest naming the s3 URL.
  const auto [missing, missing_what] = raised([] { (void)torch::Checkpoint::open(s3("checkpoints/no_such.pt"), quick(0)); });
  CHECK(missing == "kRemoteRequest");
  CHECK(missing_what.find(s3("checkpoints/no_such.pt")) != std::string::npos);
  CHECK(missing_what.find("404") != std::string::npos);
  check_no_secret(missing_what);
  // The session token is checked too: the temporary keys without it are refused.
  AwsEnv::set("AWS_ACCESS_KEY_ID", moto().temp_key_id);
  AwsEnv::set("AWS_SECRET_ACCESS_KEY", moto().temp_secret);
  const auto [no_token, no_token_what] = raised([] { (void)torch::Checkpoint::open(s3(kObjects[0]), quick(0)); });
  CHECK(no_token == "kRemoteRequest");
  check_no_secret(no_token_what);
  // A wrong secret: moto recomputes the signature and refuses it (403); the message names no secret.
  AwsEnv::set("AWS_ACCESS_KEY_ID", moto().key_id);
  AwsEnv::set("AWS_SECRET_ACCESS_KEY", "wrong" + moto().secret.substr(5));
  const auto [wrong, wrong_what] = raised([] { (void)torch::Checkpoint::open(s3(kObjects[0]), quick(0)); });
  CHECK(wrong == "kRemoteRequest");
  CHECK(wrong_what.find("403") != std::string::npos);
  CHECK(wrong_what.find(s3(kObjects[0])) != std::string::npos);
  CHECK(wrong_what.find("wrong" + moto().secret.substr(5)) == std::string::npos);
  check_no_secret(wrong_what);
  // Unsigned requests are refused too: moto really checks.
  ::unsetenv("AWS_ACCESS_KEY_ID");
  ::unsetenv("AWS_SECRET_ACCESS_KEY");
  CHECK(raised([] { (void)torch::Checkpoint::open(s3(kObjects[0]), quick(0)); }).first == "kRemoteRequest");
  AwsEnv::set("AWS_ACCESS_KEY_ID", moto().key_id);
  AwsEnv::set("AWS_SECRET_ACCESS_KEY", moto().secret);
  // The ETag pin against moto's If-Match: the object replaced between opening (its structure)
  // and reading its storages is kRemoteChanged, never a mix of the two objects.
  const std::string key = "checkpoints/shufflenet_v2_x0_5.t113.pt";
  const auto opened = torch::Checkpoint::open(s3(key), quick(0));
  REQUIRE(moto().put(key, kFixtures + "/checkpoints/dtypes.t2x.pt") == "OK");
  const auto [changed, changed_what] = raised([&] { opened.prefetch(); });
  CHECK(changed == "kRemoteChanged");
  CHECK(changed_what.find(s3(key)) != std::string::npos);
  // Opened again, it is the new object, whole.
  CHECK(hashes(torch::Checkpoint::open(s3(key), quick())) ==
        hashes(torch::Checkpoint::open(kFixtures + "/checkpoints/dtypes.t2x.pt")));
  REQUIRE(moto().put(key, kFixtures + "/" + key) == "OK");
  // verify of an index by URL whose weight_map names a shard the bucket lacks: that shard's
  // problem names its s3 URL and the 404.
  const auto broken = std::filesystem::temp_directory_path() / ("maploc-moto-" + std::to_string(::getpid()) + ".json");
  {
    std::FILE* f = std::fopen(broken.c_str(), "w");
    REQUIRE(f != nullptr);
    std::fputs("{\"weight_map\": {\"gone.weight\": \"absent.safetensors\"}}\n", f);
    std::fclose(f);
  }
  REQUIRE(moto().put("sharded/st_set/broken.index.json", broken.string()) == "OK");
  std::filesystem::remove(broken);
  const auto report = torch::verify(s3("sharded/st_set/broken.index.json"));
  CHECK_FALSE(report.ok());
  REQUIRE(report.problems.size() == 1);
  CHECK(report.problems[0].rfind("absent.safetensors: cannot be read: ", 0) == 0);
  CHECK(report.problems[0].find(s3("sharded/st_set/absent.safetensors")) != std::string::npos);
  CHECK(report.problems[0].find("404") != std::string::npos);
  check_no_secret(report.problems[0]);
  const auto cli = test::run_shell(std::string("'") + MAPLOC_CLI + "' verify '" + s3("sharded/st_set/broken.index.json") +
                                   "' 2>&1");
  CHECK(cli.exit_code != 0);
  CHECK(cli.out.find("BROKEN") != std::string::npos);
  check_no_secret(cli.out);
}
