// run_shell.h - a shell command line run from a test (the maploc binary, mostly): its exit status and
// what it wrote to stdout (the command line redirects stderr where a test wants it too).
#pragma once

#include <catch2/catch.hpp>

#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace maploc::test {

struct Run {
  int exit_code;  ///< -1 when ended by a signal
  std::string out;
};

inline Run run_shell(const std::string& cmd) {
  FILE* pipe = popen(cmd.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::string out;
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, pipe)) > 0;) out.append(buf, n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

}  // namespace maploc::test
