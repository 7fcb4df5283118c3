// corpus_test.cpp - every file of the malicious corpus gives its ErrorCode (or loads inertly),
// in bounded time and memory, and no payload ever runs.
#include <catch2/catch.hpp>

#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "maploc/error.h"
#include "maploc/limits.h"
#include "maploc/pickle/disassemble.h"
#include "cpu_time.h"
#include "security/security_util.h"

using namespace maploc::security;

namespace {

// Bounds for one forked read (peak RSS includes the pages the child shares with
// this test process and, in build-asan, ASan's shadow memory).
constexpr std::uint64_t kMaxRssKb = 768 * 1024;
// CPU time of the child (a loaded machine adds wall-clock time only), ten times under a sanitizer.
constexpr double kMaxCpuSeconds = 20.0 * maploc::test::kSanitizerSlowdown;

}  // namespace

TEST_CASE("every malicious file gives its code in bounded time and memory", "[security][malformed][limits]") {
  REQUIRE(manifest().size() >= 60);
  for (const auto& e : manifest()) {
    const Measured m = run_forked(e);
    INFO(e.file << " (" << e.reader << "): " << e.why);
    INFO("peak RSS " << m.peak_rss_kb / 1024 << " MiB, cpu " << m.cpu_seconds << " s, " << m.seconds << " s");
    CHECK(m.outcome == e.expect);
    CHECK(m.peak_rss_kb < kMaxRssKb);
    CHECK(m.cpu_seconds < kMaxCpuSeconds);
  }
}

TEST_CASE("every Limits field is tripped by some file of the corpus", "[security][limits]") {
  // A limit is tested when a file lowers it and expects the limit's code, or
  // trips it at its default (nesting 1000, rank 64).
  std::set<std::string> lowered;
  for (const auto& e : manifest()) {
    for (const auto& [name, value] : e.limits) lowered.insert(name);
  }
  lowered.insert("pickle_max_nesting_depth");  // nesting_bomb.pkl at the default 1000
  // Tripped at their defaults by the complexity corpus (tests/security/complexity_test.cpp):
  // tensor_bomb.pt, long_names.pt, walk_bytes_bomb.pt; the int-digit cap is never an error (hex
  // beyond it: tests/pickle/machine_test.cpp, bigint_key_*.pt and bigint_dis_*.pkl).
  for (const char* f : {"torch_max_tensors", "torch_max_name_bytes", "torch_max_walk_bytes", "pickle_max_int_digits"})
    lowered.insert(f);
  for (const char* field : {"zip_max_entries", "zip_max_inflated_bytes", "zip_max_compression_ratio",
                            "pickle_max_stack_depth", "pickle_max_nesting_depth", "pickle_max_memo_entries",
                            "pickle_max_string_bytes", "pickle_max_container_items", "pickle_max_total_bytes",
                            "torch_max_rank", "torch_max_walk_paths", "pickle_max_int_digits", "torch_max_tensors",
                            "torch_max_name_bytes", "torch_max_walk_bytes", "torch_max_expanded_bytes"}) {
    INFO(field);
    CHECK(lowered.count(field) == 1);
  }
  // Defaults stay large enough for a 100 GB shard and a 500,000-tensor state_dict.
  const maploc::Limits d;
  CHECK(d.zip_max_entries >= (1u << 22));
  CHECK(d.pickle_max_container_items >= (1u << 20));
  CHECK(d.torch_max_rank == 64);
  CHECK(d.torch_max_walk_paths == (std::uint64_t{1} << 26));
  CHECK(d.torch_max_tensors >= (1u << 19));
  CHECK(d.pickle_max_int_digits == 4300);
}

TEST_CASE("a file passes once the limit it trips is raised back to the default", "[security][limits]") {
  for (const auto& e : manifest()) {
    if (e.limits.empty()) continue;
    Entry relaxed = e;
    relaxed.limits.clear();
    INFO(e.file);
    const std::string outcome = run_forked(relaxed).outcome;
    CHECK(outcome != e.expect);
    CHECK(outcome != "crashed");
  }
}

TEST_CASE("no payload runs: maploc ls, dis and load on every file leave no canary", "[security][cli]") {
  const std::string canary = canary_path();
  std::filesystem::remove(canary);
  for (const auto& e : manifest()) {
    const std::string file = malicious_dir() + "/" + e.file;
    for (const char* cmd : {"ls", "dis", "load --map-location cpu"}) {
      const std::string line = std::string("'") + MAPLOC_CLI + "' " + cmd + " '" + file + "' >/dev/null 2>&1";
      const int status = std::system(line.c_str());
      INFO(line);
      REQUIRE(WIFEXITED(status));
      // 0 ok, 2 (dis of a file with no pickle), 3 bad file, 4 mapping error; never a
      // crash (the shell reports a signal as 128+n).
      const int code = WEXITSTATUS(status);
      CHECK((code == 0 || code == 2 || code == 3 || code == 4));
    }
  }
  CHECK_FALSE(std::filesystem::exists(canary));
}

TEST_CASE("the disassembler's output stays linear in the MARK depth", "[security][limits]") {
  // pickletools indents every line by the MARK depth: 50k MARKs would print 5 GB.
  std::vector<std::uint8_t> marks(50000, '(');
  marks.insert(marks.begin(), {0x80, 2});
  marks.push_back('.');
  std::ostringstream out;
  try {
    (void)maploc::pickle::disassemble(marks, out);
  } catch (const maploc::Error&) {
    // STOP with marks open is an error; the output so far is what counts
  }
  CHECK(out.str().size() < std::size_t{25} << 20);
}
