// complexity_test.cpp - the algorithmic-complexity corpus (fixtures/malicious/complexity.py, built
// into the build directory by ctest's fixture step): every file, read at the DEFAULT limits in a
// child under a 2 GiB address-space limit, gives its code or opens, within the guarantee that
// docs/security.md states; and each growth shape at 8x the size costs less than 16x the CPU time.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cpu_time.h"
#include "security/security_util.h"

using namespace maploc::security;

namespace {

using maploc::test::kSanitized;

// The guarantee of docs/security.md: CPU time at most kFixedSeconds + kSecondsPerMB per MB of
// input, peak memory at most kFixedBytes + kBytesPerByte per input byte. Sanitizers are slower
// and reserve terabytes of shadow memory, so they get ten times the time and no address-space limit.
constexpr double kSlow = maploc::test::kSanitizerSlowdown;
constexpr double kFixedSeconds = 2.0;
constexpr double kSecondsPerMB = 1.0;
constexpr std::uint64_t kFixedBytes = std::uint64_t{1} << 30;
constexpr std::uint64_t kBytesPerByte = 64;
constexpr std::uint64_t kAddressSpace = std::uint64_t{2} << 30;

struct Item {
  Entry entry;
  std::string shape;
  std::uint64_t n = 0;
  std::uint64_t bytes = 0;
};

std::vector<Item> corpus() {
  const std::string dir = MAPLOC_COMPLEXITY_DIR;
  std::ifstream in(dir + "/complexity.json");
  if (!in) FAIL("no " << dir << "/complexity.json: the ctest fixture 'security: generate the complexity corpus' "
                          "(python3 fixtures/malicious/complexity.py) did not run");
  const auto j = nlohmann::json::parse(in);
  std::vector<Item> out;
  for (const auto& e : j.at("entries")) {
    Item it;
    it.entry.file = dir + "/" + e.at("file").get<std::string>();
    it.entry.reader = e.at("reader");
    it.entry.expect = e.at("expect");
    it.entry.why = e.at("why");
    it.shape = e.at("shape");
    it.n = e.at("n");
    it.bytes = e.at("bytes");
    out.push_back(std::move(it));
  }
  return out;
}

ForkLimits bounds() {
  ForkLimits l;
  if (!kSanitized) l.address_space_bytes = kAddressSpace;
  return l;
}

// The least CPU time of a few runs: a loaded machine only ever adds time.
Measured fastest(const Entry& e, int runs) {
  Measured best = run_forked(e, bounds());
  for (int i = 1; i < runs && best.outcome == e.expect; ++i) {
    const Measured m = run_forked(e, bounds());
    if (m.cpu_seconds < best.cpu_seconds) best = m;
  }
  return best;
}

}  // namespace

TEST_CASE("every complexity-corpus file opens or fails with its code, within the stated bounds",
          "[security][complexity]") {
  const auto items = corpus();
  REQUIRE(items.size() >= 40);
  if (kSanitized) WARN("sanitizer build: no RLIMIT_AS, ten times the time bound");
  for (const auto& it : items) {
    const Measured m = run_forked(it.entry, bounds());
    const double mb = static_cast<double>(it.bytes) / 1e6;
    INFO(it.entry.file << " (" << it.entry.reader << ", " << it.bytes << " bytes): " << it.entry.why);
    INFO("cpu " << m.cpu_seconds << " s, peak RSS " << m.peak_rss_kb / 1024 << " MiB");
    CHECK(m.outcome == it.entry.expect);
    CHECK(m.cpu_seconds < kSlow * (kFixedSeconds + kSecondsPerMB * mb));
    if (!kSanitized) CHECK(m.peak_rss_kb * 1024 < kFixedBytes + kBytesPerByte * it.bytes);
  }
}

TEST_CASE("each growth shape at 8x the size costs less than 16x the CPU time", "[security][complexity]") {
  std::map<std::string, std::vector<Item>> shapes;
  for (auto& it : corpus()) shapes[it.shape].push_back(std::move(it));
  int pairs = 0;
  for (auto& [shape, sizes] : shapes) {
    if (sizes.size() != 2) continue;
    std::sort(sizes.begin(), sizes.end(), [](const Item& a, const Item& b) { return a.n < b.n; });
    REQUIRE(sizes[1].n == 8 * sizes[0].n);
    const Measured small = fastest(sizes[0].entry, 3);
    const Measured big = fastest(sizes[1].entry, 3);
    // A floor of 20 ms keeps a run too short to time (page-fault noise) from making the ratio meaningless.
    const double base = std::max(small.cpu_seconds, 0.02);
    std::printf("growth %-18s n=%-8llu %.4f s  8n %.4f s  ratio %.1f\n", shape.c_str(),
                static_cast<unsigned long long>(sizes[0].n), small.cpu_seconds, big.cpu_seconds, big.cpu_seconds / base);
    INFO(shape << ": n=" << sizes[0].n << " " << small.cpu_seconds << " s, n=" << sizes[1].n << " "
               << big.cpu_seconds << " s, ratio " << big.cpu_seconds / base);
    CHECK(small.outcome == sizes[0].entry.expect);
    CHECK(big.outcome == sizes[1].entry.expect);
    CHECK(big.cpu_seconds < 16.0 * base);
    ++pairs;
  }
  CHECK(pairs >= 20);
}

TEST_CASE("an allocation failure is kLimitMemory, never bad_alloc or an abort", "[security][complexity]") {
  if (kSanitized) {
    WARN("sanitizer build: RLIMIT_AS cannot be set under AddressSanitizer; checked in the plain build");
    return;
  }
  // A legitimate 10 MB checkpoint needs about 120 MB; the child gets 24 MB more address space
  // than it has when forked, whatever the open fails to allocate first.
  std::uint64_t vm_kb = 0;
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmSize:", 0) == 0) vm_kb = std::stoull(line.substr(7));
  }
  REQUIRE(vm_kb > 0);
  for (const auto& it : corpus()) {
    if (it.shape != "tensor_names" && it.shape != "st_tensors" && it.shape != "dict_int_shift") continue;
    if (it.n < 30000) continue;
    for (const char* reader : {"checkpoint", "load"}) {
      Entry e = it.entry;
      e.reader = reader;
      ForkLimits tight;
      tight.address_space_bytes = (vm_kb + 24 * 1024) * 1024;
      const Measured m = run_forked(e, tight);
      INFO(e.file << " (" << reader << ") under RLIMIT_AS " << tight.address_space_bytes / (1 << 20) << " MiB");
      CHECK(m.outcome == "kLimitMemory");
    }
  }
}
