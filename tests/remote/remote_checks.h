// remote_checks.h - what the URL tests share: the loopback server over the fixtures, tensor
// hashes, options with bounded retries, and the code and message an expression raises.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "maploc/error.h"
#include "maploc/torch/checkpoint.h"
#include "maploc/torch/hash.h"
#include "remote/loopback_server.h"

namespace maploc::test {

inline const std::string kFixtures = MAPLOC_FIXTURES_DIR;

/// tests/remote/range_server.py over fixtures/, one per test program, started on first use.
inline LoopbackServer& fixture_server() {
  static LoopbackServer s(kFixtures);
  return s;
}

/// "name sha256" of every tensor ("name -" for one without a storage).
inline std::vector<std::string> hashes(const torch::Checkpoint& c) {
  std::vector<std::string> out;
  for (const auto& t : c.tensors()) out.push_back(t.name + " " + (t.storage ? torch::tensor_sha256(c, t) : "-"));
  return out;
}

/// Open options whose requests are retried `retries` times at most.
inline torch::Options with_retries(unsigned retries) {
  torch::Options o;
  o.remote.retries = retries;
  return o;
}

/// The code an expression raises, and its message (both empty when it raises nothing).
inline std::pair<std::string, std::string> raised(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return {std::string(error_code_name(e.code())), e.what()};
  }
  return {};
}

}  // namespace maploc::test
