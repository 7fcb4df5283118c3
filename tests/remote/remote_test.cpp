// remote_test.cpp - checkpoints read by URL from a loopback server: every tensor's hash equals the
// local file's, ls-style opening reads only the structure, and each injected fault gives its
// retry or its error (docs/remote.md).
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
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

using test::hashes;
using test::kFixtures;
using test::raised;

test::LoopbackServer& server() { return test::fixture_server(); }

torch::Options quick(unsigned retries = 4) { return test::with_retries(retries); }

const char* const kFiles[] = {
    "checkpoints/gpu_tagged.t113.pt",   "checkpoints/dtypes.t2x.pt",        "checkpoints/deflated.t2x.pt",
    "checkpoints/dtypes_be.t113.pt",    "checkpoints/torchscript.t2x.pt",   "checkpoints/views_shared.t2x.pt",
    "checkpoints/zip64_extra.t2x.pt",   "checkpoints/zip64_local.t113.pt",  "checkpoints/junk_prefix.t2x.pt",
    "checkpoints/zip_after_pickle.t2x.pt", "checkpoints/dtypes_legacy.t113.pt", "checkpoints/tar_format.hand.pt",
    "checkpoints/shufflenet_v2_x0_5.t113.pt", "safetensors/dtypes.safetensors",
};

}  // namespace

TEST_CASE("every tensor read by URL hashes as the local file's", "[remote]") {
  for (const char* f : kFiles) {
    INFO(f);
    const auto local = torch::Checkpoint::open(kFixtures + "/" + f);
    const auto remote = torch::Checkpoint::open(server().url("ok", f), quick());
    CHECK(remote.format() == local.format());
    CHECK(hashes(remote) == hashes(local));
    const auto t = remote.remote_transfer();
    REQUIRE(t.has_value());
    CHECK(t->object_bytes == std::filesystem::file_size(kFixtures + "/" + f));
    CHECK(t->read_in_full == (local.format() == torch::Format::kLegacy || local.format() == torch::Format::kTar));
    CHECK_FALSE(local.remote_transfer().has_value());
  }
}

TEST_CASE("remap::load of a URL places the same bytes as the local load", "[remote]") {
  const std::string f = "checkpoints/shufflenet_v2_x0_5.t113.pt";
  remap::LoadOptions lo;
  lo.map = remap::MapLocation::all_to("cpu");
  lo.host = remap::HostMemory::kOwnedCopy;
  const auto local = torch::Checkpoint::open(kFixtures + "/" + f);
  const auto remote = torch::Checkpoint::open(server().url("ok", f), quick());
  const auto a = remap::load(local, lo), b = remap::load(remote, lo);
  REQUIRE(a.tensors().size() == b.tensors().size());
  for (std::size_t i = 0; i < a.tensors().size(); ++i) CHECK(a.tensor_sha256(i) == b.tensor_sha256(i));
}

TEST_CASE("opening a zip checkpoint by URL reads its structure, not its storages", "[remote]") {
  const std::string f = "checkpoints/shufflenet_v2_x0_5.t113.pt";
  const auto c = torch::Checkpoint::open(server().url("ok", f), quick());
  const auto opened = *c.remote_transfer();
  std::uint64_t payload = 0;
  for (const auto& s : c.storages()) payload += s.nbytes;
  INFO("bytes read on open: " << opened.bytes_read << " of " << opened.object_bytes << " (" << payload
                              << " bytes of storages)");
  CHECK(opened.bytes_read < opened.object_bytes / 4);
  CHECK(opened.requests < 64);
  c.prefetch();
  const auto all = *c.remote_transfer();
  CHECK(all.bytes_read >= opened.object_bytes);
  CHECK(all.bytes_read < opened.object_bytes + opened.object_bytes / 4);
  c.prefetch();  // nothing left to fetch
  CHECK(c.remote_transfer()->requests == all.requests);
}

TEST_CASE("faults that pass on a retry are retried", "[remote]") {
  const std::string f = "checkpoints/shufflenet_v2_x0_5.t113.pt";
  const auto local = torch::Checkpoint::open(kFixtures + "/" + f);
  for (const char* mode : {"flaky", "short1", "reset1", "redirect"}) {
    INFO(mode);
    const auto c = torch::Checkpoint::open(server().url(mode, f), quick());
    c.prefetch();  // the storages' requests in parallel, each retried on its own
    CHECK(hashes(c) == hashes(local));
    if (std::string(mode) != "redirect") CHECK(c.remote_transfer()->retries > 0);
  }
}

TEST_CASE("faults that persist are errors naming the URL", "[remote]") {
  const std::string f = "checkpoints/shufflenet_v2_x0_5.t113.pt";
  auto load = [&](const std::string& mode, torch::Options o) {
    return [=] {
      const auto c = torch::Checkpoint::open(server().url(mode, mode == "ok" ? "checkpoints/no_such.pt" : f), o);
      c.prefetch();
    };
  };
  torch::Options small_whole = quick(1);
  small_whole.remote.whole_object_bytes = 64 << 10;
  const std::vector<std::pair<std::string, std::pair<std::string, torch::Options>>> cases = {
      {"kRemoteRequest", {"short", quick(1)}},
      {"kRemoteBadResponse", {"wrongrange", quick(1)}},
      {"kRemoteBadResponse", {"norange", small_whole}},
      {"kRemoteChanged", {"replaced", quick(1)}},
      {"kRemoteRedirects", {"loop", quick(1)}},
      {"kRemoteRequest", {"ok", quick(1)}},  // 404
  };
  for (const auto& [code, mode_options] : cases) {
    INFO(mode_options.first);
    const auto [got, what] = raised(load(mode_options.first, mode_options.second));
    CHECK(got == code);
    CHECK(what.find(server().url(mode_options.first, "")) != std::string::npos);
  }
  // A server that ignores Range is fine for an object small enough to take whole.
  const auto c = torch::Checkpoint::open(server().url("norange", f), quick());
  CHECK(c.remote_transfer()->requests == 1);
}

TEST_CASE("a 416 to the first request names the size the server gave", "[remote]") {
  const std::string f = "checkpoints/gpu_tagged.t113.pt";
  const auto size = std::to_string(std::filesystem::file_size(kFixtures + "/" + f));
  const auto [code, what] = raised([&] { (void)torch::Checkpoint::open(server().url("unsatisfiable", f), quick(0)); });
  CHECK(code == "kRemoteBadResponse");
  CHECK(what.find("416") != std::string::npos);
  CHECK(what.find("bytes */" + size) != std::string::npos);
  CHECK(what.find("empty") == std::string::npos);
  CHECK(what.find(server().url("unsatisfiable", f)) != std::string::npos);
}

TEST_CASE("no credential of a URL appears in a path, a message or the JSON", "[remote]") {
  const std::string f = "checkpoints/gpu_tagged.t113.pt";
  const std::string secret_url = "http://someone:pa55word@127.0.0.1:" + std::to_string(server().port()) + "/ok/" + f +
                                 "?X-Amz-Signature=s1gnature";
  const auto c = torch::Checkpoint::open(secret_url, quick());
  CHECK(c.path() == server().url("ok", f));
  const std::string failing = "http://someone:pa55word@127.0.0.1:" + std::to_string(server().port()) + "/loop/" + f +
                              "?X-Amz-Signature=s1gnature";
  const auto [code, what] = raised([&] { (void)torch::Checkpoint::open(failing, quick(0)); });
  CHECK(code == "kRemoteRedirects");
  CHECK(what.find("pa55word") == std::string::npos);
  CHECK(what.find("s1gnature") == std::string::npos);
  const auto r = test::run_shell(std::string("'") + MAPLOC_CLI + "' ls --json '" + secret_url + "' 2>&1");
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("pa55word") == std::string::npos);
  CHECK(r.out.find("s1gnature") == std::string::npos);
  CHECK(r.out.find("\"remote\"") != std::string::npos);
}

TEST_CASE("s3:// URLs are signed with SigV4 and read path-style from the endpoint", "[remote]") {
  const std::string key_id = "AKIDMAPLOCTEST", secret = "s3cr3tKEYmaploc", token = "T0KENmaploc";
  test::LoopbackServer s3(kFixtures, {"TEST_S3_KEY_ID=" + key_id, "TEST_S3_SECRET=" + secret, "TEST_S3_TOKEN=" + token});
  ::setenv("AWS_ENDPOINT_URL", ("http://127.0.0.1:" + std::to_string(s3.port()) + "/s3").c_str(), 1);
  ::setenv("AWS_REGION", "eu-test-1", 1);
  ::setenv("AWS_ACCESS_KEY_ID", key_id.c_str(), 1);
  ::setenv("AWS_SECRET_ACCESS_KEY", secret.c_str(), 1);
  ::setenv("AWS_SESSION_TOKEN", token.c_str(), 1);
  const std::string f = "checkpoints/shufflenet_v2_x0_5.t113.pt";
  const auto c = torch::Checkpoint::open("s3://bucket/" + f, quick());
  CHECK(c.path() == "s3://bucket/" + f);
  CHECK(hashes(c) == hashes(torch::Checkpoint::open(kFixtures + "/" + f)));
  const auto r = test::run_shell(std::string("'") + MAPLOC_CLI + "' load --json --hash 's3://bucket/" + f + "' 2>&1");
  CHECK(r.exit_code == 0);
  CHECK(r.out.find(secret) == std::string::npos);
  CHECK(r.out.find(token) == std::string::npos);
  // The same keys from a shared credentials file (profile "maploc") when the environment has none.
  const auto creds = std::filesystem::temp_directory_path() / ("maploc-remote-creds-" + std::to_string(::getpid()));
  {
    std::ofstream out(creds);
    out << "[default]\naws_access_key_id = WRONG\naws_secret_access_key = WRONG\n\n[maploc]\naws_access_key_id = "
        << key_id << "\naws_secret_access_key = " << secret << "\naws_session_token = " << token << "\n";
  }
  ::unsetenv("AWS_ACCESS_KEY_ID");
  ::unsetenv("AWS_SECRET_ACCESS_KEY");
  ::unsetenv("AWS_SESSION_TOKEN");
  ::setenv("AWS_SHARED_CREDENTIALS_FILE", creds.c_str(), 1);
  ::setenv("AWS_PROFILE", "maploc", 1);
  CHECK(torch::Checkpoint::open("s3://bucket/" + f, quick()).tensors().size() == c.tensors().size());
  ::unsetenv("AWS_SHARED_CREDENTIALS_FILE");
  ::unsetenv("AWS_PROFILE");
  std::filesystem::remove(creds);
  ::setenv("AWS_ACCESS_KEY_ID", key_id.c_str(), 1);
  ::setenv("AWS_SESSION_TOKEN", token.c_str(), 1);
  // A wrong secret: the server refuses the signature; the message names neither secret.
  ::setenv("AWS_SECRET_ACCESS_KEY", "wrongSECRETvalue", 1);
  const auto [code, what] = raised([&] { (void)torch::Checkpoint::open("s3://bucket/" + f, quick(0)); });
  CHECK(code == "kRemoteRequest");
  CHECK(what.find("403") != std::string::npos);
  CHECK(what.find("wrongSECRETvalue") == std::string::npos);
  CHECK(what.find(token) == std::string::npos);
  for (const char* v : {"AWS_ENDPOINT_URL", "AWS_REGION", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"}) {
    ::unsetenv(v);
  }
}

namespace {

// The lines a server started with TEST_REQUEST_LOG=<file> logged ("<Host> <path> authorization=0|1 token=0|1").
std::vector<std::string> logged(const std::filesystem::path& file) {
  std::vector<std::string> out;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

bool any_secret(const std::vector<std::string>& lines) {
  for (const auto& l : lines) {
    if (l.find("authorization=1") != std::string::npos || l.find("token=1") != std::string::npos) return true;
  }
  return false;
}

std::filesystem::path log_file(const std::string& name) {
  const auto p = std::filesystem::temp_directory_path() / ("maploc-redirect-" + std::to_string(::getpid()) + "-" + name);
  std::filesystem::remove(p);
  return p;
}

}  // namespace

TEST_CASE("a signed s3 request follows no redirect to another origin: its signature and token stay there", "[remote]") {
  const std::string key_id = "AKIDMAPLOCTEST", secret = "s3cr3tKEYmaploc", token = "T0KENmaploc";
  const auto origin_log = log_file("origin"), port_log = log_file("port"), host_log = log_file("host");
  test::LoopbackServer s3(kFixtures, {"TEST_S3_KEY_ID=" + key_id, "TEST_S3_SECRET=" + secret, "TEST_S3_TOKEN=" + token,
                                      "TEST_REQUEST_LOG=" + origin_log.string()});
  test::LoopbackServer other_port(kFixtures, {"TEST_REQUEST_LOG=" + port_log.string()});
  test::LoopbackServer other_host(kFixtures, {"TEST_BIND_HOST=127.0.0.2", "TEST_REQUEST_LOG=" + host_log.string()});
  const std::string origin = "http://127.0.0.1:" + std::to_string(s3.port());
  ::setenv("AWS_REGION", "eu-test-1", 1);
  ::setenv("AWS_ACCESS_KEY_ID", key_id.c_str(), 1);
  ::setenv("AWS_SECRET_ACCESS_KEY", secret.c_str(), 1);
  ::setenv("AWS_SESSION_TOKEN", token.c_str(), 1);
  const std::string f = "checkpoints/gpu_tagged.t113.pt";
  // Another port, another address, another host name for the same server: each refused, naming
  // where it pointed (scheme, host, port) and nothing of the Location's user information or query.
  const std::vector<std::string> elsewhere = {"127.0.0.1/" + std::to_string(other_port.port()),
                                              "127.0.0.2/" + std::to_string(other_host.port()),
                                              "localhost/" + std::to_string(s3.port())};
  for (const auto& host_port : elsewhere) {
    INFO(host_port);
    ::setenv("AWS_ENDPOINT_URL", (origin + "/away/http/" + host_port).c_str(), 1);
    const auto [code, what] = raised([&] { (void)torch::Checkpoint::open("s3://bucket/" + f, quick(0)); });
    CHECK(code == "kRemoteRedirects");
    CHECK(what.find("redirect") != std::string::npos);
    std::string shown = "http://" + host_port;
    shown[shown.rfind('/')] = ':';
    CHECK(what.find("to " + shown + " ") != std::string::npos);
    for (const std::string& hidden : {std::string("who"), std::string("L0cpass"), std::string("L0csig"), secret, token}) {
      CHECK(what.find(hidden) == std::string::npos);
    }
  }
  CHECK(logged(port_log).empty());
  CHECK(logged(host_log).empty());
  for (const auto& line : logged(origin_log)) {
    INFO(line);
    CHECK(line.rfind("127.0.0.1:" + std::to_string(s3.port()) + " ", 0) == 0);  // never Host: localhost
  }
  CHECK(!any_secret(logged(port_log)));
  CHECK(!any_secret(logged(host_log)));
  // A redirect within the origin is followed, signed again for its path (the server checks it).
  ::setenv("AWS_ENDPOINT_URL", (origin + "/s3here").c_str(), 1);
  CHECK(hashes(torch::Checkpoint::open("s3://bucket/" + f, quick(0))) ==
        hashes(torch::Checkpoint::open(kFixtures + "/" + f)));
  for (const char* v : {"AWS_ENDPOINT_URL", "AWS_REGION", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"}) {
    ::unsetenv(v);
  }
  for (const auto& p : {origin_log, port_log, host_log}) std::filesystem::remove(p);
}

TEST_CASE("an unsigned request follows a redirect to another origin without user information", "[remote]") {
  const auto origin_log = log_file("u-origin"), host_log = log_file("u-host");
  test::LoopbackServer first(kFixtures, {"TEST_REQUEST_LOG=" + origin_log.string()});
  test::LoopbackServer other_host(kFixtures, {"TEST_BIND_HOST=127.0.0.2", "TEST_REQUEST_LOG=" + host_log.string()});
  const std::string f = "checkpoints/gpu_tagged.t113.pt";
  const std::string url = "http://someone:pa55word@127.0.0.1:" + std::to_string(first.port()) + "/away/http/127.0.0.2/" +
                          std::to_string(other_host.port()) + "/ok/" + f;
  const auto c = torch::Checkpoint::open(url, quick(0));
  c.prefetch();
  CHECK(hashes(c) == hashes(torch::Checkpoint::open(kFixtures + "/" + f)));
  const auto at_origin = logged(origin_log), at_other = logged(host_log);
  CHECK(!at_origin.empty());
  CHECK(!at_other.empty());
  for (const auto& line : at_origin) CHECK(line.find("authorization=1") != std::string::npos);  // its own user info
  CHECK(!any_secret(at_other));  // neither the URL's user information nor the Location's
  for (const auto& p : {origin_log, host_log}) std::filesystem::remove(p);
  // A redirect to another scheme says it was a redirect and where to, not "Unsupported protocol".
  const auto [code, what] = raised([&] {
    (void)torch::Checkpoint::open(server().url("away", "ftp/127.0.0.1/21/" + f), quick(0));
  });
  CHECK(code == "kRemoteRedirects");
  CHECK(what.find("a redirect to ftp://127.0.0.1:21 ") != std::string::npos);
  CHECK(what.find("L0cpass") == std::string::npos);
  CHECK(what.find("L0csig") == std::string::npos);
}

TEST_CASE("the CLI reads URLs in ls (with --records), dis, plan, load, verify, convert and remap", "[remote]") {
  const std::string f = "checkpoints/gpu_tagged.t113.pt";
  const std::string url = server().url("ok", f);
  const std::string cli = std::string("'") + MAPLOC_CLI + "' ";
  const auto ls = test::run_shell(cli + "ls --json '" + url + "'");
  CHECK(ls.exit_code == 0);
  CHECK(ls.out.find("\"bytes_read\"") != std::string::npos);
  CHECK(test::run_shell(cli + "plan '" + url + "' --map-location 'cuda:*->cpu'").exit_code == 0);
  const auto records = test::run_shell(cli + "ls --records --json '" + url + "'");
  CHECK(records.exit_code == 0);
  CHECK(records.out.find("/data.pkl") != std::string::npos);
  const auto remote_load = test::run_shell(cli + "load --hash '" + url + "' --map-location 'cuda:*->cpu'");
  const auto local_load = test::run_shell(cli + "load --hash '" + kFixtures + "/" + f + "' --map-location 'cuda:*->cpu'");
  CHECK(remote_load.exit_code == 0);
  auto hash_lines = [](const std::string& text) {
    std::string out;
    for (std::size_t at = 0, nl; (nl = text.find('\n', at)) != std::string::npos; at = nl + 1) {
      const std::string line = text.substr(at, nl - at);
      if (line.size() > 66 && line.find_first_not_of("0123456789abcdef") == 64) out += line + "\n";
    }
    return out;
  };
  CHECK(hash_lines(remote_load.out) == hash_lines(local_load.out));
  CHECK(!hash_lines(remote_load.out).empty());
  CHECK(test::run_shell(cli + "verify '" + url + "'").exit_code == 0);
  const auto out = std::filesystem::temp_directory_path() / ("maploc-remote-" + std::to_string(::getpid()) + ".safetensors");
  CHECK(test::run_shell(cli + "convert '" + url + "' '" + out.string() + "'").exit_code == 0);
  CHECK(std::filesystem::exists(out));
  std::filesystem::remove(out);
  const auto remapped = std::filesystem::temp_directory_path() / ("maploc-remote-" + std::to_string(::getpid()) + ".pt");
  CHECK(test::run_shell(cli + "remap '" + url + "' '" + remapped.string() + "' --map-location 'cuda:*->cpu'").exit_code == 0);
  const auto back = torch::Checkpoint::open(remapped);
  CHECK(hashes(back) == hashes(torch::Checkpoint::open(kFixtures + "/" + f)));
  std::filesystem::remove(remapped);
  const auto load_json = test::run_shell(cli + "load --json '" + url + "' --map-location 'cuda:*->cpu'");
  CHECK(load_json.out.find("\"remote\"") != std::string::npos);
  CHECK(load_json.out.find("\"requests\"") != std::string::npos);
  // dis: a zip's data.pkl and a legacy stream's pickles, as of the local file.
  for (const std::string& g : {f, std::string("checkpoints/dtypes_legacy.t113.pt")}) {
    const auto remote_dis = test::run_shell(cli + "dis '" + server().url("ok", g) + "'");
    CHECK(remote_dis.exit_code == 0);
    CHECK(remote_dis.out == test::run_shell(cli + "dis '" + kFixtures + "/" + g + "'").out);
    CHECK(remote_dis.out.find("STOP") != std::string::npos);
  }
  const auto bad = test::run_shell(cli + "ls '" + server().url("loop", f) + "' 2>&1");
  CHECK(bad.exit_code == 3);
  CHECK(bad.out.find("[kRemoteRedirects]") != std::string::npos);
}

namespace {

// The "read by URL: N bytes for SIZE in K requests" check of a verify report, as {N, SIZE, K}.
std::vector<unsigned long long> read_line(const std::string& check) {
  unsigned long long read = 0, size = 0, requests = 0;
  const auto at = check.find("read by URL: ");
  if (at == std::string::npos ||
      std::sscanf(check.c_str() + at, "read by URL: %llu bytes for %llu in %llu", &read, &size, &requests) != 3) {
    return {};
  }
  return {read, size, requests};
}

}  // namespace

TEST_CASE("verify by URL honours the caller's remote options, for a file and a set's shards", "[remote][verify]") {
  const std::string f = "checkpoints/shufflenet_v2_x0_5.t113.pt";
  const auto local = torch::verify(kFixtures + "/" + f);
  REQUIRE(local.ok());
  // Retries: the flaky server answers each range's first request 503. Without retries the first
  // request is the last; with them every check holds, the read line counting what was retried.
  const auto [code, what] = raised([&] { (void)torch::verify(server().url("flaky", f), quick(0)); });
  CHECK(code == "kRemoteRequest");
  CHECK(what.find("after 1 attempts") != std::string::npos);
  const auto retried = torch::verify(server().url("flaky", f), quick(4));
  INFO((retried.problems.empty() ? std::string() : retried.problems.front()));
  CHECK(retried.ok());
  CHECK(std::vector<std::string>(retried.checks.begin(), retried.checks.end() - 1) == local.checks);
  CHECK(retried.checks.back().find(" retried)") != std::string::npos);
  // Request sizes: 64 KiB requests instead of 8 MiB ones, each byte still read once.
  const auto plain = read_line(torch::verify(server().url("ok", f), quick()).checks.back());
  torch::Options small = quick();
  small.remote.chunk_bytes = 64 << 10;
  const auto chunked_report = torch::verify(server().url("ok", f), small);
  CHECK(chunked_report.ok());
  const auto chunked = read_line(chunked_report.checks.back());
  REQUIRE(plain.size() == 3);
  REQUIRE(chunked.size() == 3);
  INFO("default: " << plain[2] << " requests; 64 KiB requests: " << chunked[2]);
  CHECK(plain[0] == plain[1]);
  CHECK(chunked[0] == chunked[1]);
  CHECK(plain[2] <= 4);
  CHECK(chunked[2] >= chunked[1] / (64 << 10));
  // A set's index by URL: the index and each shard beside it opened with the same options (a first
  // request of 64 bytes: each shard, about 1 KiB, then takes a second one).
  const std::string index = "sharded/st_set/model.safetensors.index.json";
  torch::Options short_tail = quick();
  short_tail.remote.tail_bytes = 64;
  for (const auto& [options, per_object] : {std::pair{quick(), 1ull}, std::pair{short_tail, 2ull}}) {
    const auto report = torch::verify(server().url("ok", index), options);
    INFO((report.problems.empty() ? std::string() : report.problems.front()));
    CHECK(report.ok());
    std::size_t reads = 0;
    for (const auto& c : report.checks) {
      const auto line = read_line(c);
      if (line.empty()) continue;
      INFO(c);
      ++reads;
      CHECK(line[0] == line[1]);
      if (line[1] > 64) CHECK(line[2] == per_object);
    }
    CHECK(reads == 4);  // the index and its three shards
  }
}

TEST_CASE("a sharded set's index by URL opens its shards beside it", "[remote]") {
  for (const char* index : {"sharded/st_set/model.safetensors.index.json", "sharded/bin_set/pytorch_model.bin.index.json"}) {
    INFO(index);
    const auto local = torch::Checkpoint::open(kFixtures + "/" + index);
    const auto remote = torch::Checkpoint::open(server().url("ok", index), quick());
    REQUIRE(remote.format() == torch::Format::kSet);
    REQUIRE(remote.members().size() == local.members().size());
    for (std::size_t m = 0; m < remote.members().size(); ++m) {
      CHECK(remote.members()[m].path.rfind(server().url("ok", ""), 0) == 0);
      CHECK(remote.members()[m].file_bytes == local.members()[m].file_bytes);
    }
    remote.prefetch();
    CHECK(hashes(remote) == hashes(local));
  }
}
