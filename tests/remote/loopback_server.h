// loopback_server.h - starts tests/remote/range_server.py on 127.0.0.1 (port 0) for one test process.
// A server that does not start (no python3, a broken script) fails the test: it never skips.
#pragma once

#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>

namespace maploc::test {

class LoopbackServer {
 public:
  /// Serves `root`; extra environment variables (NAME=VALUE) go to the server only.
  explicit LoopbackServer(const std::string& root, std::vector<std::string> env = {}) {
    int out[2];
    REQUIRE(::pipe(out) == 0);
    pid_ = ::fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      ::dup2(out[1], 1);
      ::close(out[0]);
      ::close(out[1]);
      for (auto& e : env) ::putenv(e.data());
      ::execl(MAPLOC_PYTHON3, MAPLOC_PYTHON3, MAPLOC_RANGE_SERVER, root.c_str(), static_cast<char*>(nullptr));
      std::perror("exec " MAPLOC_PYTHON3);
      ::_exit(127);
    }
    ::close(out[1]);
    FILE* f = ::fdopen(out[0], "r");
    REQUIRE(f != nullptr);
    char line[64] = {};
    const bool got = std::fgets(line, sizeof line, f) != nullptr && std::sscanf(line, "PORT %d", &port_) == 1;
    std::fclose(f);
    INFO("the loopback server " MAPLOC_RANGE_SERVER " did not start with " MAPLOC_PYTHON3);
    REQUIRE(got);
  }
  ~LoopbackServer() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  LoopbackServer(const LoopbackServer&) = delete;
  LoopbackServer& operator=(const LoopbackServer&) = delete;

  int port() const { return port_; }
  /// http://127.0.0.1:<port>/<mode>/<file>
  std::string url(const std::string& mode, const std::string& file) const {
    return "http://127.0.0.1:" + std::to_string(port_) + "/" + mode + "/" + file;
  }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
};

}  // namespace maploc::test
