// physical_reference.cpp - what this machine can do at best with a file's bytes: memcpy, pread, mmap
// (loading-performance-and-security.md A.11, A.13 R1-R3 and, built with CUDA, R5-R7).
// Usage: maploc_bench_physical FILE [--threads N] [--chunk-mib M] [--reps R] [--cold] [--gpu]
// Prints one JSON object: for each reference, GB/s as median, min and max over R repetitions.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "physical_reference.h"

namespace bench {
namespace {

constexpr std::size_t kPage = 4096;

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Anonymous memory of n bytes, asked to use transparent huge pages (a loader can do the same).
struct Buffer {
  std::uint8_t* p = nullptr;
  std::size_t n = 0;
  explicit Buffer(std::size_t size, bool prefault, bool huge = true) : n(size) {
    void* a = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (a == MAP_FAILED) {
      std::perror("mmap");
      std::exit(1);
    }
    p = static_cast<std::uint8_t*>(a);
    if (huge) ::madvise(p, n, MADV_HUGEPAGE);
    if (prefault) std::memset(p, 1, n);
  }
  ~Buffer() { ::munmap(p, n); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
};

// Runs body(lo, hi) over [0, n) cut into `chunk`-sized pieces handed to `threads` threads.
void parallel_chunks(std::size_t n, std::size_t chunk, unsigned threads,
                     const std::function<void(std::size_t, std::size_t)>& body) {
  std::atomic<std::size_t> next{0};
  auto worker = [&] {
    for (;;) {
      const std::size_t lo = next.fetch_add(chunk);
      if (lo >= n) return;
      body(lo, std::min(n, lo + chunk));
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (auto& th : pool) th.join();
}

void pread_all(int fd, std::uint8_t* dst, std::size_t lo, std::size_t hi) {
  while (lo < hi) {
    const ssize_t got = ::pread(fd, dst + lo, hi - lo, static_cast<off_t>(lo));
    if (got <= 0) {
      std::perror("pread");
      std::exit(1);
    }
    lo += static_cast<std::size_t>(got);
  }
}

double resident_fraction(int fd, std::size_t size) {
  void* m = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  if (m == MAP_FAILED) return -1;
  std::vector<unsigned char> vec((size + kPage - 1) / kPage);
  double frac = -1;
  if (::mincore(m, size, vec.data()) == 0) {
    std::size_t in = 0;
    for (unsigned char v : vec) in += v & 1;
    frac = static_cast<double>(in) / static_cast<double>(vec.size());
  }
  ::munmap(m, size);
  return frac;
}

void drop_pages(int fd) { ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED); }

void warm(int fd, std::size_t size) {
  Buffer b(std::min<std::size_t>(size, std::size_t{64} << 20), true);
  for (std::size_t off = 0; off < size; off += b.n) pread_all(fd, b.p - off, off, std::min(size, off + b.n));
}

}  // namespace

void Report::add(const std::string& name, std::vector<double> gbps, const std::string& note) {
  std::sort(gbps.begin(), gbps.end());
  rows.push_back({name, gbps[gbps.size() / 2], gbps.front(), gbps.back(), note});
}

void Report::print(const std::string& file, std::uint64_t bytes, unsigned threads) const {
  std::printf("{\"file\": \"%s\", \"bytes\": %llu, \"threads\": %u, \"refs\": {", file.c_str(),
              static_cast<unsigned long long>(bytes), threads);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    std::printf("%s\n  \"%s\": {\"gbps\": %.3f, \"min\": %.3f, \"max\": %.3f, \"note\": \"%s\"}", i ? "," : "",
                r.name.c_str(), r.median, r.min, r.max, r.note.c_str());
  }
  std::printf("\n}}\n");
}

}  // namespace bench

int main(int argc, char** argv) {
  using namespace bench;
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s FILE [--threads N] [--chunk-mib M] [--reps R] [--cold] [--gpu]\n", argv[0]);
    return 2;
  }
  unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  std::size_t chunk = std::size_t{8} << 20;
  int reps = 5;
  bool cold = false, gpu = false;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--threads" && i + 1 < argc) threads = static_cast<unsigned>(std::atoi(argv[++i]));
    else if (a == "--chunk-mib" && i + 1 < argc) chunk = static_cast<std::size_t>(std::atoi(argv[++i])) << 20;
    else if (a == "--reps" && i + 1 < argc) reps = std::atoi(argv[++i]);
    else if (a == "--cold") cold = true;
    else if (a == "--gpu") gpu = true;
  }
  const int fd = ::open(argv[1], O_RDONLY);
  struct stat st {};
  if (fd < 0 || ::fstat(fd, &st) != 0) {
    std::perror(argv[1]);
    return 1;
  }
  const auto size = static_cast<std::size_t>(st.st_size);
  const double gb = static_cast<double>(size) / 1e9;
  Report report;
  warm(fd, size);

  {  // R1: memcpy between pre-faulted buffers of the file's size (at most 1 GiB)
    const std::size_t n = std::min<std::size_t>(size, std::size_t{1} << 30);
    Buffer src(n, true), dst(n, true);
    std::vector<double> v;
    for (int r = 0; r < reps; ++r) {
      const double t0 = now_s();
      parallel_chunks(n, chunk, threads, [&](std::size_t lo, std::size_t hi) { std::memcpy(dst.p + lo, src.p + lo, hi - lo); });
      v.push_back(static_cast<double>(n) / 1e9 / (now_s() - t0));
    }
    report.add("memcpy", v, "pre-faulted source and destination");
  }
  {  // R2: pread of the hot file into a pre-faulted buffer
    Buffer dst(size, true);
    std::vector<double> v;
    for (int r = 0; r < reps; ++r) {
      const double t0 = now_s();
      parallel_chunks(size, chunk, threads, [&](std::size_t lo, std::size_t hi) { pread_all(fd, dst.p, lo, hi); });
      v.push_back(gb / (now_s() - t0));
    }
    report.add("pread_prefaulted", v, "hot page cache into a pre-faulted buffer");
  }
  {  // R2': the same into fresh memory, as any loader that allocates its result must
    std::vector<double> v;
    for (int r = 0; r < reps; ++r) {
      const double t0 = now_s();
      Buffer dst(size, false);
      parallel_chunks(size, chunk, threads, [&](std::size_t lo, std::size_t hi) { pread_all(fd, dst.p, lo, hi); });
      v.push_back(gb / (now_s() - t0));
    }
    report.add("pread_fresh", v, "hot page cache into fresh (huge-page) memory, faults included");
  }
  {
    std::vector<double> v;
    for (int r = 0; r < reps; ++r) {
      const double t0 = now_s();
      Buffer dst(size, false, false);
      parallel_chunks(size, chunk, threads, [&](std::size_t lo, std::size_t hi) { pread_all(fd, dst.p, lo, hi); });
      v.push_back(gb / (now_s() - t0));
    }
    report.add("pread_fresh_4k", v, "hot page cache into fresh memory without MADV_HUGEPAGE, faults included");
  }
  // R3: mmap the file and touch every page (one byte per 4 KiB), with each advice.
  struct MapVariant {
    const char* name;
    int flags;
    int advice;
  };
  for (const MapVariant mv : {MapVariant{"mmap_touch", 0, -1}, MapVariant{"mmap_touch_sequential", 0, MADV_SEQUENTIAL},
                              MapVariant{"mmap_touch_populate", MAP_POPULATE, -1},
                              MapVariant{"mmap_touch_populate_read", 0, MADV_POPULATE_READ}}) {
    std::vector<double> v;
    for (int r = 0; r < reps; ++r) {
      const double t0 = now_s();
      void* m = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE | mv.flags, fd, 0);
      if (m == MAP_FAILED) break;
      const auto* p = static_cast<const volatile std::uint8_t*>(m);
      std::atomic<unsigned> sum{0};
      parallel_chunks(size, chunk, threads, [&](std::size_t lo, std::size_t hi) {
        if (mv.advice >= 0) ::madvise(const_cast<std::uint8_t*>(p) + lo, hi - lo, mv.advice);
        unsigned s = 0;
        for (std::size_t off = lo; off < hi; off += kPage) s += p[off];
        sum += s;
      });
      v.push_back(gb / (now_s() - t0));
      ::munmap(m, size);
    }
    if (!v.empty()) report.add(mv.name, v, "map + read one byte per page, unmap excluded");
  }
  {  // mmap, then memcpy every byte into fresh memory (the pre-change owned-copy path, in parallel)
    std::vector<double> v;
    for (int r = 0; r < reps; ++r) {
      const double t0 = now_s();
      void* m = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
      Buffer dst(size, false);
      parallel_chunks(size, chunk, threads, [&](std::size_t lo, std::size_t hi) {
        ::madvise(static_cast<std::uint8_t*>(m) + lo, hi - lo, MADV_POPULATE_READ);
        std::memcpy(dst.p + lo, static_cast<const std::uint8_t*>(m) + lo, hi - lo);
      });
      v.push_back(gb / (now_s() - t0));
      ::munmap(m, size);
    }
    report.add("mmap_copy_fresh", v, "mmap + MADV_POPULATE_READ + memcpy into fresh memory");
  }
  {  // private copy-on-write mapping, every page written in the kernel: private memory, one copy, no zeroing
    std::vector<double> v;
    for (int r = 0; r < reps; ++r) {
      const double t0 = now_s();
      void* m = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
      parallel_chunks(size, chunk, threads, [&](std::size_t lo, std::size_t hi) {
        ::madvise(static_cast<std::uint8_t*>(m) + lo, hi - lo, MADV_POPULATE_WRITE);
      });
      v.push_back(gb / (now_s() - t0));
      ::munmap(m, size);
    }
    report.add("mmap_private_populate_write", v, "MAP_PRIVATE writable mapping + MADV_POPULATE_WRITE (copy-on-write in the kernel)");
  }
  {  // fresh memory populated for writing by the kernel first, then pread into it
    std::vector<double> v;
    for (int r = 0; r < reps; ++r) {
      const double t0 = now_s();
      Buffer dst(size, false);
      parallel_chunks(size, chunk, threads, [&](std::size_t lo, std::size_t hi) {
        ::madvise(dst.p + lo, hi - lo, MADV_POPULATE_WRITE);
        pread_all(fd, dst.p, lo, hi);
      });
      v.push_back(gb / (now_s() - t0));
    }
    report.add("pread_fresh_populated", v, "fresh memory, MADV_POPULATE_WRITE per chunk, then pread");
  }
  if (cold) {  // R4 without root: drop the file's clean pages, check with mincore, read them back
    std::vector<double> v;
    double before = 1, after = 1;
    for (int r = 0; r < reps; ++r) {
      drop_pages(fd);
      before = resident_fraction(fd, size);
      const double t0 = now_s();
      Buffer dst(size, false);
      parallel_chunks(size, chunk, threads, [&](std::size_t lo, std::size_t hi) { pread_all(fd, dst.p, lo, hi); });
      v.push_back(gb / (now_s() - t0));
      after = resident_fraction(fd, size);
    }
    char note[128];
    std::snprintf(note, sizeof note, "posix_fadvise DONTNEED first: %.0f%% resident before, %.0f%% after",
                  before * 100, after * 100);
    report.add("pread_cold", v, note);
    warm(fd, size);
  }
  if (gpu) gpu_references(fd, size, threads, chunk, reps, report);
  report.print(argv[1], size, threads);
  ::close(fd);
  return 0;
}
