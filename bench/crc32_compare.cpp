// crc32_compare.cpp - CRC-32 (the zip checksum) of one large buffer by zlib, libdeflate and ISA-L, side by side.
// Usage: maploc_bench_crc32 [MiB=1024] [runs=5]. Prints GB/s (median of runs) per library and checks that
// all give the same CRC. libdeflate is measured where its headers were found at build time.
#include <isa-l/crc.h>
#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>
#ifdef MAPLOC_BENCH_LIBDEFLATE
#include <libdeflate.h>
#endif

#include "proc_stats.h"

namespace {

struct Candidate {
  const char* name;
  std::function<std::uint32_t(const std::uint8_t*, std::size_t)> crc;
};

std::uint32_t zlib_crc(const std::uint8_t* p, std::size_t n) {
  uLong c = 0;
  for (std::size_t off = 0; off < n;) {
    const std::size_t k = std::min<std::size_t>(n - off, std::size_t{1} << 30);
    c = crc32(c, p + off, static_cast<uInt>(k));
    off += k;
  }
  return static_cast<std::uint32_t>(c);
}

}  // namespace

int main(int argc, char** argv) {
  const std::size_t mib = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1024;
  const int runs = argc > 2 ? std::atoi(argv[2]) : 5;
  std::vector<std::uint8_t> buf(mib << 20);
  std::uint64_t x = 0x9E3779B97F4A7C15ull;
  for (auto& b : buf) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    b = static_cast<std::uint8_t>(x);
  }
  std::vector<Candidate> candidates = {
      {"zlib crc32", zlib_crc},
#ifdef MAPLOC_BENCH_LIBDEFLATE
      {"libdeflate_crc32", [](const std::uint8_t* p, std::size_t n) { return libdeflate_crc32(0, p, n); }},
#endif
      {"isa-l crc32_gzip_refl", [](const std::uint8_t* p, std::size_t n) { return crc32_gzip_refl(0, p, n); }},
  };
  std::uint32_t expect = 0;
  bool agree = true;
  std::printf("CRC-32 of %zu MiB, median of %d runs (zlib %s)\n", mib, runs, zlibVersion());
  for (std::size_t c = 0; c < candidates.size(); ++c) {
    std::vector<double> s;
    std::uint32_t crc = 0;
    for (int r = 0; r < runs; ++r) {
      const double t0 = bench::now_s();
      crc = candidates[c].crc(buf.data(), buf.size());
      s.push_back(bench::now_s() - t0);
    }
    std::sort(s.begin(), s.end());
    if (c == 0) expect = crc;
    agree = agree && crc == expect;
    std::printf("  %-24s %6.2f GB/s (min %.2f, max %.2f)  crc %08x\n", candidates[c].name,
                static_cast<double>(buf.size()) / s[s.size() / 2] / 1e9, static_cast<double>(buf.size()) / s.back() / 1e9,
                static_cast<double>(buf.size()) / s.front() / 1e9, crc);
  }
  std::printf(agree ? "all agree\n" : "CRCs DIFFER\n");
  return agree ? 0 : 1;
}
