// libtorch_peer.cpp - LibTorch's C++ reader (torch::pickle_load) on a torch.save file, measured like load_bench.
// Built by bench/run.sh against Debian's libtorch-dev when it is installed; never part of the CMake build.
// Usage: maploc_bench_libtorch FILE  -> one JSON object, or {"error": ...} when LibTorch cannot read the file.
#include "proc_stats.h"
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <torch/csrc/jit/serialization/pickle.h>
#include <torch/torch.h>

namespace {

using bench::now_s;
using bench::proc_field;

// Sums bytes of every tensor reachable from v (dicts, lists, tuples).
void walk(const c10::IValue& v, std::size_t& tensors, std::uint64_t& bytes) {
  if (v.isTensor()) {
    ++tensors;
    bytes += v.toTensor().nbytes();
  } else if (v.isGenericDict()) {
    for (const auto& e : v.toGenericDict()) walk(e.value(), tensors, bytes);
  } else if (v.isList()) {
    for (const auto& e : v.toListRef()) walk(e, tensors, bytes);
  } else if (v.isTuple()) {
    for (const auto& e : v.toTupleRef().elements()) walk(e, tensors, bytes);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const long long rss0 = proc_field("/proc/self/status", "VmRSS:");
  const long long rchar0 = proc_field("/proc/self/io", "rchar:");
  {
    const int fd = ::open("/proc/self/clear_refs", O_WRONLY);
    if (fd >= 0) {
      [[maybe_unused]] auto n = ::write(fd, "5", 1);
      ::close(fd);
    }
  }
  rusage ru0{};
  ::getrusage(RUSAGE_SELF, &ru0);
  try {
    const double t0 = now_s();
    // pickle_load takes the whole file in a vector: read it with large read() calls.
    std::ifstream in(argv[1], std::ios::binary | std::ios::ate);
    std::vector<char> data(static_cast<std::size_t>(in.tellg()));
    in.seekg(0);
    in.read(data.data(), static_cast<std::streamsize>(data.size()));
    const double t1 = now_s();
    const c10::IValue v = torch::pickle_load(data);
    const double t2 = now_s();
    std::size_t tensors = 0;
    std::uint64_t bytes = 0;
    walk(v, tensors, bytes);
    rusage ru1{};
    ::getrusage(RUSAGE_SELF, &ru1);
    std::printf(
        "{\"open_s\": %.6f, \"load_s\": %.6f, \"total_s\": %.6f, \"bytes\": %llu, \"tensors\": %zu, "
        "\"rss_peak_over_base_kb\": %lld, \"minflt\": %ld, \"majflt\": %ld, \"rchar\": %lld}\n",
        t1 - t0, t2 - t1, t2 - t0, static_cast<unsigned long long>(bytes), tensors,
        proc_field("/proc/self/status", "VmHWM:") - rss0, ru1.ru_minflt - ru0.ru_minflt,
        ru1.ru_majflt - ru0.ru_majflt, proc_field("/proc/self/io", "rchar:") - rchar0);
  } catch (const std::exception& e) {
    std::string msg = e.what();
    msg = msg.substr(0, msg.find('\n'));
    for (char& c : msg) if (c == '"' || c == '\\') c = '\'';
    std::printf("{\"error\": \"%s\"}\n", msg.c_str());
    return 1;
  }
  return 0;
}
