// load_bench.cpp - one maploc load in a fresh process, measured the way bench/peers.py measures torch.
// Usage: maploc_bench_load FILE --mode lazy|materialised|resident|first|cuda [--threads N] [--cold]
//                          [--readers N] [--no-arena] [--staging-mib M] [--staging-buffers K]
//   lazy          Checkpoint::open + remap::load with mapped views (every tensor usable, no byte read)
//   materialised  the same with HostMemory::kOwnedCopy: every byte in private memory
//   resident      copy-on-write views (kMappedView, writable) with every page populated before
//                 load() returns: every byte resident and mapped, shared with the page cache until written
//   first         open + a private copy of the first tensor's storage (time to first tensor)
//   cuda          map_location cuda:0; load() returns after the device is synchronised
// CUDA options (mode cuda): --readers N (CudaOptions::reader_threads, default 8), --no-arena (one device
// allocation per storage), --staging-mib M and --staging-buffers K (the pinned ring's geometry).
// Prints one JSON object: seconds, bytes, peak RSS over the baseline (and absolute), faults and rchar;
// in mode cuda also cuda_init_s and the CUDA options used.
//
// What the timer holds in mode cuda (the same split as bench/peers.py, whose torch creates its CUDA
// context with torch.zeros(1, device="cuda:0") before its timer):
//   outside, before it (cuda_init_s): loading the CUDA runtime, creating the context, and a warm-up
//     load of a one-tensor checkpoint (a temporary safetensors file) to cuda:0 with the same
//     CudaOptions, so that the backend's cached pinned staging ring of exactly this geometry exists
//     (src/remap/upload.cpp, StagingCache: the ring is kept between uploads when count and size match)
//     and the first device allocation has been made. The baseline RSS is read after it, so the ring's
//     pinned pages are in rss_base_kb, not in rss_peak_over_base_kb (rss_peak_kb has everything).
//   inside: Checkpoint::open, the plan, the device allocation(s), the streams and events of this
//     upload, every pread into the ring and copy to the device, and the final synchronisation.
//   outside, after it: freeing the device memory (the result is destroyed after the timer).
#include "proc_stats.h"
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
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

// The warm-up of mode cuda: a one-tensor safetensors file (16 float32 values) written to a temporary
// file, loaded with `options` (to cuda:0, same CudaOptions) and dropped. Leaves the CUDA context, the
// backend's staging ring of this geometry and the device allocator warm; returns its seconds.
double warm_up_cuda(const maploc::remap::LoadOptions& options) {
  using namespace maploc;
  std::string header = R"({"w":{"dtype":"F32","shape":[16],"data_offsets":[0,64]}})";
  header.append((8 - header.size() % 8) % 8, ' ');
  const std::filesystem::path dir = std::filesystem::temp_directory_path();
  std::string name = (dir / "maploc-bench-warmup-XXXXXX.safetensors").string();
  const int fd = ::mkstemps(name.data(), static_cast<int>(std::strlen(".safetensors")));
  if (fd < 0) {
    throw Error(ErrorCode::kIoOpen, Stage::kRemap, "warm-up: cannot create a temporary file in " + dir.string());
  }
  std::string file(8, '\0');
  for (int i = 0; i < 8; ++i) file[static_cast<std::size_t>(i)] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  file += header;
  for (int i = 0; i < 16; ++i) {
    const float v = static_cast<float>(i);
    char b[4];
    std::memcpy(b, &v, 4);
    file.append(b, 4);
  }
  const bool written = ::write(fd, file.data(), file.size()) == static_cast<ssize_t>(file.size());
  ::close(fd);
  const double t0 = now_s();
  try {
    if (!written) throw Error(ErrorCode::kIoOpen, Stage::kRemap, "warm-up: cannot write " + name);
    const auto checkpoint = torch::Checkpoint::open(name);
    const auto loaded = remap::load(checkpoint, options);
    std::uint64_t placed = 0;
    for (const auto& s : loaded.storages()) placed += s.device.kind == remap::Device::Kind::kCuda ? s.nbytes : 0;
    if (placed != 64) {
      throw Error(ErrorCode::kInvalidArgument, Stage::kRemap, "warm-up: the tensor was not placed on a CUDA device");
    }
  } catch (...) {
    ::unlink(name.c_str());
    throw;
  }
  ::unlink(name.c_str());
  return now_s() - t0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr,
                 "usage: %s FILE --mode lazy|materialised|resident|first|cuda [--threads N] [--cold] "
                 "[--readers N] [--no-arena] [--staging-mib M] [--staging-buffers K]\n",
                 argv[0]);
    return 2;
  }
  const char* path = argv[1];
  std::string mode;
  unsigned threads = 0;
  bool cold = false;
  maploc::remap::CudaOptions cuda_options;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--mode" && i + 1 < argc) mode = argv[++i];
    else if (a == "--threads" && i + 1 < argc) threads = static_cast<unsigned>(std::atoi(argv[++i]));
    else if (a == "--cold") cold = true;
    else if (a == "--readers" && i + 1 < argc) cuda_options.reader_threads = static_cast<unsigned>(std::atoi(argv[++i]));
    else if (a == "--no-arena") cuda_options.arena = false;
    else if (a == "--staging-mib" && i + 1 < argc) cuda_options.staging_bytes = std::strtoull(argv[++i], nullptr, 10) << 20;
    else if (a == "--staging-buffers" && i + 1 < argc) {
      cuda_options.staging_buffers = static_cast<unsigned>(std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "%s: unknown or incomplete option '%s'\n", argv[0], a.c_str());
      return 2;
    }
  }
  if (mode != "lazy" && mode != "materialised" && mode != "resident" && mode != "first" && mode != "cuda") {
    std::fprintf(stderr, "%s: --mode must be lazy, materialised, resident, first or cuda (got '%s')\n", argv[0],
                 mode.c_str());
    return 2;
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
    double cuda_init_s = 0;
    if (mode == "cuda") {
      options.map = remap::MapLocation::parse("cuda:0");
      options.cuda = cuda_options;
      // Outside the timer, like torch's context creation in bench/peers.py: the runtime, the
      // context, and this geometry's staging ring (see the comment at the top of this file).
      const double c0 = now_s();
      (void)remap::DeviceInventory::probe();
      (void)warm_up_cuda(options);
      cuda_init_s = now_s() - c0;
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
    std::string cuda_fields;
    if (mode == "cuda") {
      char buf[256];
      std::snprintf(buf, sizeof buf,
                    ", \"cuda_init_s\": %.6f, \"readers\": %u, \"arena\": %s, \"staging_bytes\": %llu, "
                    "\"staging_buffers\": %u",
                    cuda_init_s, options.cuda.reader_threads, options.cuda.arena ? "true" : "false",
                    static_cast<unsigned long long>(options.cuda.staging_bytes), options.cuda.staging_buffers);
      cuda_fields = buf;
    }
    std::printf(
        "{\"open_s\": %.6f, \"load_s\": %.6f, \"total_s\": %.6f, \"bytes\": %llu, \"tensors\": %zu, "
        "\"rss_peak_over_base_kb\": %lld, \"rss_base_kb\": %lld, \"rss_peak_kb\": %lld, \"minflt\": %ld, "
        "\"majflt\": %ld, \"rchar\": %lld%s}\n",
        t1 - t0, t2 - t1, t2 - t0, static_cast<unsigned long long>(bytes), tensors, hwm - rss0, rss0, hwm,
        ru1.ru_minflt - ru0.ru_minflt, ru1.ru_majflt - ru0.ru_majflt, rchar1 - rchar0, cuda_fields.c_str());
  } catch (const Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
