// load_bench.cpp - one maploc load in a fresh process, measured the way bench/peers.py measures torch.
// Usage: maploc_bench_load FILE --mode lazy|materialised|resident|first|cuda [--threads N] [--cold]
//   lazy          Checkpoint::open + remap::load with mapped views (every tensor usable, no byte read)
//   materialised  the same with HostMemory::kOwnedCopy: every byte in private memory
//   resident      copy-on-write views (kMappedView, writable) with every page populated before
//                 load() returns: every byte resident and mapped, shared with the page cache until written
//   first         open + a private copy of the first tensor's storage (time to first tensor)
//   cuda          map_location cuda:0; load() returns after the device is synchronised
// Prints one JSON object: seconds, bytes, peak RSS over the baseline, faults and rchar.
#include "proc_stats.h"
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "maploc/error.h"
#include "maploc/remap/loaded.h"
#include "maploc/torch/checkpoint.h"

namespace {

using bench::now_s;
using bench::proc_field;

void reset_peak_rss() {
  // "5" resets VmHWM to the current RSS (proc(5), clear_refs); no privilege needed for one's own process.
  const int fd = ::open("/proc/self/clear_refs", O_WRONLY);
  if (fd >= 0) {
    [[maybe_unused]] const auto n = ::write(fd, "5", 1);
    ::close(fd);
  }
}

void drop_pages(const char* path) {
  const int fd = ::open(path, O_RDONLY);
  if (fd < 0) return;
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s FILE --mode lazy|materialised|resident|first|cuda [--threads N] [--cold]\n",
                 argv[0]);
    return 2;
  }
  const char* path = argv[1];
  std::string mode;
  unsigned threads = 0;
  bool cold = false;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--mode" && i + 1 < argc) mode = argv[++i];
    else if (a == "--threads" && i + 1 < argc) threads = static_cast<unsigned>(std::atoi(argv[++i]));
    else if (a == "--cold") cold = true;
  }
  using namespace maploc;
  try {
    remap::LoadOptions options;
    options.host_threads = threads;
    if (mode == "materialised") options.host = remap::HostMemory::kOwnedCopy;
    if (mode == "resident") {
      options.host = remap::HostMemory::kMappedView;
      options.writable = true;
      options.populate = true;
    }
    if (mode == "cuda") {
      options.map = remap::MapLocation::parse("cuda:0");
      (void)remap::DeviceInventory::probe();  // CUDA context creation is reported apart, like torch's
    } else {
      options.map = remap::MapLocation::parse("cpu");
    }
    if (cold) drop_pages(path);
    const long long rss0 = proc_field("/proc/self/status", "VmRSS:");
    const long long rchar0 = proc_field("/proc/self/io", "rchar:");
    rusage ru0{};
    ::getrusage(RUSAGE_SELF, &ru0);
    reset_peak_rss();

    const double t0 = now_s();
    const auto checkpoint = torch::Checkpoint::open(path);
    const double t1 = now_s();
    std::uint64_t bytes = 0;
    std::size_t tensors = checkpoint.tensors().size();
    double t2 = t1;
    if (mode == "first") {
      const auto& first = checkpoint.tensors().front();
      const Bytes raw = checkpoint.storage_bytes(*first.storage);
      // The buffer comes the way HostMemory::kOwnedCopy gets one (src/remap/host_memory.cpp):
      // from 2 MiB up an anonymous mapping with MADV_HUGEPAGE, below that aligned_alloc.
      const std::size_t n = (raw.size() + 63) / 64 * 64 + 64;
      const bool mapped = n >= (std::size_t{2} << 20);
      void* p = mapped ? ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
                       : std::aligned_alloc(64, n);
      if (p == nullptr || p == MAP_FAILED) throw Error(ErrorCode::kRemapOutOfMemory, Stage::kRemap, "no memory");
      if (mapped) ::madvise(p, n, MADV_HUGEPAGE);
      std::memcpy(p, raw.data(), raw.size());
      bytes = raw.size();
      // Keep the copy observable so that it is not optimised away with the free below.
      if (raw.size() > 0) bytes += static_cast<const volatile std::uint8_t*>(p)[raw.size() - 1] * 0u;
      t2 = now_s();
      if (mapped) ::munmap(p, n);
      else std::free(p);
    } else {
      const auto loaded = remap::load(checkpoint, options);
      t2 = now_s();
      for (const auto& s : loaded.storages()) bytes += s.nbytes;
    }
    rusage ru1{};
    ::getrusage(RUSAGE_SELF, &ru1);
    const long long hwm = proc_field("/proc/self/status", "VmHWM:");
    const long long rchar1 = proc_field("/proc/self/io", "rchar:");
    std::printf(
        "{\"open_s\": %.6f, \"load_s\": %.6f, \"total_s\": %.6f, \"bytes\": %llu, \"tensors\": %zu, "
        "\"rss_peak_over_base_kb\": %lld, \"minflt\": %ld, \"majflt\": %ld, \"rchar\": %lld}\n",
        t1 - t0, t2 - t1, t2 - t0, static_cast<unsigned long long>(bytes), tensors, hwm - rss0,
        ru1.ru_minflt - ru0.ru_minflt, ru1.ru_majflt - ru0.ru_majflt, rchar1 - rchar0);
  } catch (const Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
