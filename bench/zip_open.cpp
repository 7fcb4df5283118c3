// zip_open.cpp - times Archive::open (central directory + every local header) on one file.
// Usage: maploc_bench_zip_open FILE [RUNS]. Prints min/median/max over RUNS opens.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "maploc/error.h"
#include "maploc/mapped_file.h"
#include "maploc/zip/archive.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s FILE [RUNS]\n", argv[0]);
    return 2;
  }
  const int runs = argc > 2 ? std::atoi(argv[2]) : 50;
  try {
    // Separate the mapping (page cache) from the parse: time both.
    std::vector<double> open_ms, parse_ms;
    std::size_t records = 0;
    for (int i = 0; i < runs; ++i) {
      auto t0 = std::chrono::steady_clock::now();
      auto file = maploc::MappedFile::open(argv[1]);
      auto t1 = std::chrono::steady_clock::now();
      auto archive = maploc::zip::Archive::from_file(std::move(file));
      auto t2 = std::chrono::steady_clock::now();
      records = archive.records().size();
      open_ms.push_back(std::chrono::duration<double, std::milli>(t2 - t0).count());
      parse_ms.push_back(std::chrono::duration<double, std::milli>(t2 - t1).count());
    }
    auto report = [](const char* what, std::vector<double>& v) {
      std::sort(v.begin(), v.end());
      std::printf("%-26s min %8.3f ms  median %8.3f ms  max %8.3f ms\n", what, v.front(), v[v.size() / 2],
                  v.back());
    };
    std::printf("%s: %zu records, %d runs\n", argv[1], records, runs);
    report("mmap + directory + index", open_ms);
    report("directory + index only", parse_ms);
  } catch (const maploc::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
