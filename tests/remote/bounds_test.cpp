// bounds_test.cpp - time bounds of URL reads (issue 37, point 3; docs/remote.md, "Time bounds"):
// a trickling body, a server that never answers, endless error bodies and the retry budget each
// fail within the bound the test sets through remote::Options. The slack allowed over each bound
// is generous: the tests run on loaded 2-core machines and under sanitizers.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <vector>

#include "maploc/error.h"
#include "maploc/remote/object.h"
#include "maploc/torch/checkpoint.h"
#include "remote/remote_checks.h"

using namespace maploc;

namespace {

using Clock = std::chrono::steady_clock;
constexpr double kSlackSeconds = 10.0;
const std::string kFile = "checkpoints/dtypes.t2x.pt";

// Bounds that make every test take seconds: nothing but what a test sets can fail it sooner.
remote::Options small_bounds() {
  remote::Options o;
  o.retries = 4;
  o.connect_timeout_ms = 5000;
  o.timeout_ms = 60'000;
  o.timeout_rate = 1u << 30;
  o.low_speed_bytes = 1;
  o.low_speed_seconds = 600;
  o.retry_budget_ms = 60'000;
  return o;
}

struct Outcome {
  std::string code, message;
  double seconds = 0;
};

Outcome open_timed(const std::string& mode, const remote::Options& o) {
  const auto start = Clock::now();
  const auto [code, message] = test::raised([&] { remote::Object::open(test::fixture_server().url(mode, kFile), o); });
  return {code, message, std::chrono::duration<double>(Clock::now() - start).count()};
}

}  // namespace

TEST_CASE("a trickling body fails by the low-speed limit within its window and the retry budget", "[remote][bounds]") {
  auto o = small_bounds();
  o.low_speed_bytes = 1000;  // the server sends 4 bytes a second
  o.low_speed_seconds = 2;
  o.retries = 0;  // bound: the 2 s window
  const auto r = open_timed("trickle", o);
  INFO(r.message);
  CHECK(r.code == "kRemoteRequest");
  CHECK(r.message.find("too slow") != std::string::npos);
  CHECK(r.seconds > 1.5);
  CHECK(r.seconds < 2.0 + kSlackSeconds);

  o.retries = 4;
  o.retry_budget_ms = 3000;  // bound: max(2 s window, 3 s budget) + one backoff (2 s at most)
  const auto q = open_timed("trickle", o);
  INFO(q.message);
  CHECK(q.code == "kRemoteRequest");
  CHECK(q.message.find("retry budget of 3000 ms") != std::string::npos);
  CHECK(q.seconds < 3.0 + 2.0 + kSlackSeconds);
}

TEST_CASE("a trickling body fails by the request's total timeout", "[remote][bounds]") {
  auto o = small_bounds();
  o.timeout_ms = 1500;       // 4 bytes a second pass the low-speed limit of 1 byte/600 s
  o.retry_budget_ms = 2500;  // bound: max(1.5 s, 2.5 s) + one backoff
  const auto r = open_timed("trickle", o);
  INFO(r.message);
  CHECK(r.code == "kRemoteRequest");
  CHECK(r.message.find("timed out") != std::string::npos);
  CHECK(r.seconds > 1.0);
  CHECK(r.seconds < 2.5 + 2.0 + kSlackSeconds);
}

TEST_CASE("a server that accepts and never answers fails within the low-speed window and the budget", "[remote][bounds]") {
  auto o = small_bounds();
  o.low_speed_bytes = 1000;
  o.low_speed_seconds = 2;
  o.retry_budget_ms = 3000;
  const auto r = open_timed("silent", o);
  INFO(r.message);
  CHECK(r.code == "kRemoteRequest");
  CHECK(r.seconds < 3.0 + 2.0 + kSlackSeconds);

  auto t = small_bounds();
  t.timeout_ms = 1500;
  t.retry_budget_ms = 2500;
  const auto q = open_timed("silent", t);
  INFO(q.message);
  CHECK(q.code == "kRemoteRequest");
  CHECK(q.message.find("timed out") != std::string::npos);
  CHECK(q.seconds < 2.5 + 2.0 + kSlackSeconds);
}

TEST_CASE("an endless 404 body is cut at the error body cap and fails with its status at once", "[remote][bounds]") {
  auto o = small_bounds();
  o.error_body_bytes = 64u << 10;
  const auto r = open_timed("endless404", o);
  INFO(r.message);
  CHECK(r.code == "kRemoteRequest");
  CHECK(r.message.find("HTTP 404") != std::string::npos);
  CHECK(r.message.find("cut at 65536 bytes") != std::string::npos);
  CHECK(r.message.find("after") == std::string::npos);  // not retried
  CHECK(r.seconds < kSlackSeconds);
}

TEST_CASE("an endless 503 body is cut and retried within the retry budget, whatever the count", "[remote][bounds]") {
  auto o = small_bounds();
  o.retries = 1000;          // the count would allow minutes of backoff: the budget stops it
  o.retry_budget_ms = 2000;  // bound: 2 s + one backoff
  const auto r = open_timed("endless503", o);
  INFO(r.message);
  CHECK(r.code == "kRemoteRequest");
  CHECK(r.message.find("HTTP 503") != std::string::npos);
  CHECK(r.message.find("retry budget of 2000 ms") != std::string::npos);
  CHECK(r.seconds < 2.0 + 2.0 + kSlackSeconds);
}

TEST_CASE("unset bounds take their environment variables, else the documented defaults", "[remote][bounds]") {
  // The bound a test sets through the environment (as the CLI's users do) is honoured: the
  // never-answering server fails within MAPLOC_REMOTE_TIMEOUT_MS and MAPLOC_REMOTE_RETRY_BUDGET_MS.
  ::setenv("MAPLOC_REMOTE_TIMEOUT_MS", "1500", 1);
  ::setenv("MAPLOC_REMOTE_RETRY_BUDGET_MS", "2500", 1);
  ::setenv("MAPLOC_REMOTE_TIMEOUT_RATE", "1073741824", 1);  // 128 KiB at 1 GiB/s: +0 ms
  remote::Options o;
  const auto r = open_timed("silent", o);
  ::unsetenv("MAPLOC_REMOTE_TIMEOUT_RATE");
  ::unsetenv("MAPLOC_REMOTE_TIMEOUT_MS");
  ::unsetenv("MAPLOC_REMOTE_RETRY_BUDGET_MS");
  INFO(r.message);
  CHECK(r.code == "kRemoteRequest");
  CHECK(r.message.find("retry budget of 2500 ms") != std::string::npos);
  CHECK(r.seconds > 2.0);
  CHECK(r.seconds < 2.5 + 2.0 + kSlackSeconds);
  // What the environment leaves unset takes its default (the message names the low-speed limit).
  CHECK(r.message.find("at least 1024 bytes/s over 30 s") != std::string::npos);
}

TEST_CASE("a stall after opening: every request in flight fails within the bounds, each retried at most once", "[remote][bounds]") {
  // silentbig: opening passes, every request over 512 KiB (the 5 and 3 MiB storages) is never answered.
  torch::Options o;
  o.remote = small_bounds();
  o.remote.low_speed_bytes = 1000;
  o.remote.low_speed_seconds = 2;
  o.remote.retry_budget_ms = 3000;  // bound: max(2 s, 3 s) + one backoff, all requests in flight at once
  const auto remote = torch::Checkpoint::open(test::fixture_server().url("silentbig", "checkpoints/large_storages.t113.pt"), o);
  const auto before = *remote.remote_transfer();
  const auto start = Clock::now();
  const auto [code, message] = test::raised([&] { remote.prefetch(); });
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  const auto after = *remote.remote_transfer();
  INFO(message << "\nrequests " << before.requests << " -> " << after.requests << ", retries " << after.retries);
  CHECK(code == "kRemoteRequest");
  CHECK(seconds < 3.0 + 2.0 + kSlackSeconds);
  CHECK(after.retries - before.retries <= 8);  // 8 requests in flight (the default), each retried once at most
  CHECK(after.requests - before.requests <= 2 * 8);
}

TEST_CASE("a connection that never opens fails by the connect timeout", "[remote][bounds]") {
  // A listening socket whose accept queue is full and never drained: the kernel drops further SYNs,
  // so a connect waits (as for a host that drops packets) until the connect timeout.
  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(listener >= 0);
  sockaddr_in at{};
  at.sin_family = AF_INET;
  at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(listener, reinterpret_cast<sockaddr*>(&at), sizeof at) == 0);
  REQUIRE(::listen(listener, 0) == 0);
  socklen_t len = sizeof at;
  REQUIRE(::getsockname(listener, reinterpret_cast<sockaddr*>(&at), &len) == 0);
  std::vector<int> fillers;
  for (int i = 0; i < 4; ++i) {  // more than the queue holds (backlog 0: one); the rest stay pending
    const int c = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    ::connect(c, reinterpret_cast<sockaddr*>(&at), sizeof at);
    fillers.push_back(c);
  }
  ::usleep(200'000);
  auto o = small_bounds();
  o.connect_timeout_ms = 1000;
  o.retry_budget_ms = 1500;  // bound: max(1 s connect, 1.5 s budget) + one backoff
  const auto start = Clock::now();
  const auto [code, message] = test::raised(
      [&] { remote::Object::open("http://127.0.0.1:" + std::to_string(ntohs(at.sin_port)) + "/ok/" + kFile, o); });
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  for (int c : fillers) ::close(c);
  ::close(listener);
  INFO(message);
  CHECK(code == "kRemoteRequest");
  CHECK(message.find("timed out") != std::string::npos);
  CHECK(seconds > 0.5);
  CHECK(seconds < 1.5 + 2.0 + kSlackSeconds);
}
