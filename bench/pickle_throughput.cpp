// pickle_throughput.cpp - MB/s and opcodes/s of the pickle machine and disassembler on one pickle file.
//
// Usage: maploc_pickle_throughput <file.pkl> [iterations] [start_offset]
// The file is read once into memory; each iteration runs the machine over it
// (persistent ids resolved by a trivial callback, as torch's would) and the
// best and median times are reported. Then the disassembler, once per iteration.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <sstream>
#include <vector>

#include "maploc/error.h"
#include "maploc/pickle/disassemble.h"
#include "maploc/pickle/machine.h"

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void report(const char* what, std::vector<double> times, double mb, double ops) {
  std::sort(times.begin(), times.end());
  const double best = times.front();
  const double median = times[times.size() / 2];
  std::printf("%-12s best %8.3f ms  median %8.3f ms  %8.1f MB/s  %8.2f Mops/s (best)\n", what,
              best * 1e3, median * 1e3, mb / best, ops / best / 1e6);
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s <file.pkl> [iterations] [start_offset]\n", argv[0]);
    return 2;
  }
  std::ifstream f(argv[1], std::ios::binary);
  const std::vector<std::uint8_t> data{std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
  const int iterations = argc > 2 ? std::max(1, std::atoi(argv[2])) : 20;
  maploc::pickle::Options options;
  options.stream_name = argv[1];
  options.start_offset = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 0;
  // As torch's readers run it: a zip's data.pkl is the whole record; a legacy file's object
  // pickle (a start offset) has storages after it.
  options.allow_trailing = options.start_offset > 0;
  std::uint64_t pids = 0;
  options.persistent_load = [&](const maploc::pickle::Value&, std::uint64_t) -> std::optional<maploc::pickle::Value> {
    return maploc::pickle::Value::external(pids++);
  };
  try {
    std::vector<double> run_times, dis_times;
    std::uint64_t opcodes = 0, end = 0;
    for (int i = 0; i < iterations; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      const maploc::pickle::Result r = maploc::pickle::run(data, options);
      run_times.push_back(seconds_since(t0));
      opcodes = r.opcode_count();
      end = r.end_offset();
    }
    const double mb = static_cast<double>(end - options.start_offset) / 1e6;
    std::printf("%s: %.3f MB pickle, %llu opcodes, %llu persistent ids per run\n", argv[1], mb,
                static_cast<unsigned long long>(opcodes),
                static_cast<unsigned long long>(pids / static_cast<std::uint64_t>(iterations)));
    report("machine", run_times, mb, static_cast<double>(opcodes));
    maploc::pickle::DisOptions dis;
    dis.start_offset = options.start_offset;
    for (int i = 0; i < std::min(iterations, 5); ++i) {
      std::ostringstream out;
      const auto t0 = std::chrono::steady_clock::now();
      maploc::pickle::disassemble(data, out, dis);
      dis_times.push_back(seconds_since(t0));
    }
    report("disassemble", dis_times, mb, static_cast<double>(opcodes));
  } catch (const maploc::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
