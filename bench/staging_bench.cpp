// staging_bench.cpp - the host half of a CUDA load, measured on a machine without a GPU: the upload
// pipeline's reader threads filling the staging ring from the file, against plain pread of that file.
//
// usage: maploc_bench_staging FILE [--runs N] [--readers 1,2,4] [--buffers 2,4,8] [--mib 4,16,64]
//                                   [--storage-mib N]
// The device is a null one: its copies complete at once and touch nothing, so the time is the
// host side alone (pread into page-locked staging, events, batching). Prints a markdown table of
// median GB/s per ring shape, with plain pread of the same file in the same run as the reference.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "maploc/bytes.h"
#include "upload.h"

namespace {

using maploc::remap::DeviceBackend;

// A device whose memory is address space never touched and whose copies
// complete when enqueued: what is left to time is the host half.
class NullDevice final : public DeviceBackend {
 public:
  ~NullDevice() override { release_staging(); }
  std::string name() const override { return "null device"; }
  int device_count() override { return 1; }
  Status get_device(int* d) override { *d = 0; return 0; }
  Status set_device(int) override { return 0; }
  Status context_active(int, bool* a) override { *a = true; return 0; }
  Status mem_info(std::uint64_t* f, std::uint64_t* t) override { *f = *t = std::uint64_t{1} << 40; return 0; }
  Status device_alloc(void** p, std::uint64_t n) override { return map(p, n, PROT_NONE); }
  Status device_free(void* p) override { return unmap(p); }
  Status pinned_alloc(void** p, std::uint64_t n) override {
    const Status s = map(p, n, PROT_READ | PROT_WRITE);
    if (s == 0) ::mlock(*p, n);  // page-locked where the limit allows, as cudaHostAlloc pins
    return s;
  }
  Status pinned_free(void* p) override { return unmap(p); }
  Status stream_create(Stream* s) override { *s = this; return 0; }
  Status stream_destroy(Stream) override { return 0; }
  Status stream_sync(Stream) override { return 0; }
  Status stream_wait_event(Stream, Event) override { return 0; }
  Status event_create(Event* e) override { *e = this; return 0; }
  Status event_destroy(Event) override { return 0; }
  Status event_record(Event, Stream) override { return 0; }
  Status event_sync(Event) override { return 0; }
  Status copy_async(void*, const void*, std::uint64_t, CopyKind, Stream) override { return 0; }
  Status copy_peer_async(void*, int, const void*, int, std::uint64_t, Stream) override { return 0; }
  Status pointer_info(const void*, PointerInfo* i) override { i->kind = PointerKind::kHost; return 0; }
  std::string error_text(Status) override { return "null device error"; }

 private:
  Status map(void** p, std::uint64_t n, int prot) {
    void* q = ::mmap(nullptr, n, prot, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (q == MAP_FAILED) return 2;
    sizes_.emplace_back(q, n);
    *p = q;
    return 0;
  }
  Status unmap(void* p) {
    auto it = std::find_if(sizes_.begin(), sizes_.end(), [&](const auto& e) { return e.first == p; });
    if (it == sizes_.end()) return 1;
    ::munmap(p, it->second);
    sizes_.erase(it);
    return 0;
  }
  std::vector<std::pair<void*, std::uint64_t>> sizes_;
};

std::vector<unsigned> list_of(const char* text) {
  std::vector<unsigned> out;
  for (const char* p = text; *p != '\0';) {
    char* end = nullptr;
    out.push_back(static_cast<unsigned>(std::strtoul(p, &end, 10)));
    p = *end == ',' ? end + 1 : end;
    if (end == p && *p != '\0') break;
  }
  return out;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Plain pread of the whole file in 8 MiB pieces into one reused buffer: the reference.
double pread_seconds(int fd, std::uint64_t size) {
  static std::vector<std::uint8_t> buffer(std::size_t{8} << 20);
  const auto t0 = std::chrono::steady_clock::now();
  for (std::uint64_t off = 0; off < size;) {
    const ssize_t got = ::pread(fd, buffer.data(), buffer.size(), static_cast<off_t>(off));
    if (got <= 0) break;
    off += static_cast<std::uint64_t>(got);
  }
  return seconds_since(t0);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s FILE [--runs N] [--readers L] [--buffers L] [--mib L] [--storage-mib N]\n", argv[0]);
    return 2;
  }
  unsigned runs = 5;
  std::uint64_t storage_mib = 64;
  std::vector<unsigned> readers = {1, 2, 4}, buffers = {2, 4, 8}, mibs = {4, 16, 64};
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string opt = argv[i];
    if (opt == "--runs") runs = static_cast<unsigned>(std::atoi(argv[i + 1]));
    if (opt == "--readers") readers = list_of(argv[i + 1]);
    if (opt == "--buffers") buffers = list_of(argv[i + 1]);
    if (opt == "--mib") mibs = list_of(argv[i + 1]);
    if (opt == "--storage-mib") storage_mib = std::strtoull(argv[i + 1], nullptr, 10);
  }
  const int fd = ::open(argv[1], O_RDONLY | O_CLOEXEC);
  struct stat st {};
  if (fd < 0 || ::fstat(fd, &st) != 0 || st.st_size <= 0) {
    std::perror(argv[1]);
    return 1;
  }
  const auto size = static_cast<std::uint64_t>(st.st_size);
  void* mapping = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  if (mapping == MAP_FAILED) return 1;

  // The file as consecutive storages of storage_mib each, all to one null device.
  auto device = std::make_shared<NullDevice>();
  void* base = nullptr;
  const auto owner = maploc::remap::detail::device_allocate(device, 0, size, &base, "bench");
  std::vector<maploc::remap::detail::UploadJob> jobs;
  const std::uint64_t piece = std::max<std::uint64_t>(storage_mib, 1) << 20;
  for (std::uint64_t off = 0; off < size; off += piece) {
    const std::uint64_t n = std::min(piece, size - off);
    jobs.push_back({maploc::Bytes(nullptr, static_cast<const std::uint8_t*>(mapping) + off, n),
                    static_cast<std::int64_t>(off), 1, static_cast<std::uint8_t*>(base) + off, 0, "bench"});
  }

  pread_seconds(fd, size);  // warm the page cache, untimed
  std::vector<double> reference;
  std::printf("file: %s, %.2f GB, %zu storages of %llu MiB, median of %u runs\n\n", argv[1], static_cast<double>(size) / 1e9,
              jobs.size(), static_cast<unsigned long long>(storage_mib), runs);
  std::printf("| reader threads | staging buffers | buffer MiB | host half GB/s | plain pread GB/s (same run) | ratio |\n");
  std::printf("|---:|---:|---:|---:|---:|---:|\n");
  for (unsigned r : readers) {
    for (unsigned b : buffers) {
      for (unsigned m : mibs) {
        maploc::remap::CudaOptions o;
        o.reader_threads = r;
        o.staging_buffers = b;
        o.staging_bytes = std::uint64_t{m} << 20;
        maploc::remap::detail::upload(*device, jobs, fd, o, maploc::remap::detail::Destinations::kSeparate);  // untimed: makes the ring, warms it
        std::vector<double> ring_times, pread_times;
        for (unsigned k = 0; k < runs; ++k) {  // interleaved, so that both see the same machine
          pread_times.push_back(pread_seconds(fd, size));
          const auto t0 = std::chrono::steady_clock::now();
          maploc::remap::detail::upload(*device, jobs, fd, o, maploc::remap::detail::Destinations::kSeparate);
          ring_times.push_back(seconds_since(t0));
        }
        const double gb = static_cast<double>(size) / 1e9;
        const double ring = gb / median(ring_times), plain = gb / median(pread_times);
        std::printf("| %u | %u | %u | %.2f | %.2f | %.2f |\n", r, b, m, ring, plain, ring / plain);
        std::fflush(stdout);
      }
    }
  }
  ::munmap(mapping, size);
  ::close(fd);
  return 0;
}
