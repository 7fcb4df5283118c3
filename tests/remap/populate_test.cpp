// populate_test.cpp - LoadOptions::populate: every page of every placed storage resident and mapped
// before load() returns, the bytes and writability unchanged, errors naming the storage.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "error_of.h"
#include "manifest.h"
#include "maploc/error.h"
#include "maploc/remap/loaded.h"
#include "host_memory.h"

namespace maploc::test {
namespace {

using remap::Device;
using remap::HostMemory;
using remap::LoadOptions;
using remap::MapLocation;
using remap::PlacedStorage;

const remap::DeviceInventory kCpuOnly{0, false, {}, {}};
constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;

LoadOptions options(HostMemory host, bool writable, bool populate) {
  LoadOptions o;
  o.map = MapLocation::parse("cpu");
  o.host = host;
  o.writable = writable;
  o.populate = populate;
  o.inventory = &kCpuOnly;
  return o;
}

std::uintptr_t page() { return static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE)); }

// [data, data + n) rounded out to whole pages: {first page's address, page count}.
std::pair<std::uintptr_t, std::size_t> pages(const void* data, std::uint64_t n) {
  const auto begin = reinterpret_cast<std::uintptr_t>(data) / page() * page();
  const auto end = (reinterpret_cast<std::uintptr_t>(data) + n + page() - 1) / page() * page();
  return {begin, (end - begin) / page()};
}

// Pages of the range that mincore() says are not in memory.
std::size_t pages_not_resident(const void* data, std::uint64_t n) {
  const auto [begin, count] = pages(data, n);
  std::vector<unsigned char> in(count);
  REQUIRE(::mincore(reinterpret_cast<void*>(begin), count * page(), in.data()) == 0);
  std::size_t missing = 0;
  for (const unsigned char c : in) missing += (c & 1) == 0;
  return missing;
}

// Pages of the range with no page-table entry in this process (/proc/self/pagemap
// bit 63: present, 62: swapped), or nullopt where pagemap cannot be read. Unlike
// mincore, which only says the page cache holds the file's page, this says a
// first read would not fault.
std::optional<std::size_t> pages_not_mapped(const void* data, std::uint64_t n) {
  const int fd = ::open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  const auto [begin, count] = pages(data, n);
  std::vector<std::uint64_t> entries(count);
  const auto want = static_cast<ssize_t>(count * sizeof(std::uint64_t));
  const ssize_t got = ::pread(fd, entries.data(), static_cast<std::size_t>(want),
                              static_cast<off_t>(begin / page() * sizeof(std::uint64_t)));
  ::close(fd);
  if (got != want) return std::nullopt;
  std::size_t missing = 0;
  for (const std::uint64_t e : entries) missing += (e >> 62) == 0;
  return missing;
}

struct Residency {
  std::size_t not_resident = 0;
  std::optional<std::size_t> not_mapped = 0;
};

// Summed over every CPU storage with bytes.
Residency residency(const remap::Loaded& loaded) {
  Residency r;
  for (const auto& s : loaded.storages()) {
    if (s.device != Device::cpu() || s.nbytes == 0) continue;
    r.not_resident += pages_not_resident(s.data, s.nbytes);
    const auto unmapped = pages_not_mapped(s.data, s.nbytes);
    r.not_mapped = unmapped && r.not_mapped ? std::optional(*r.not_mapped + *unmapped) : std::nullopt;
  }
  return r;
}

// A copy of a fixture (or a sparse file of `size` bytes) in the temp folder,
// written back to disk so that its pages can be dropped from the page cache.
class TempFile {
 public:
  explicit TempFile(const std::string& fixture_file) : path_(fresh_path()) {
    std::filesystem::copy_file(fixture("checkpoints/" + fixture_file), path_);
    sync();
  }
  explicit TempFile(std::uint64_t size) : path_(fresh_path()) {
    const int fd = ::open(path_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    REQUIRE(fd >= 0);
    REQUIRE(::ftruncate(fd, static_cast<off_t>(size)) == 0);
    ::close(fd);
  }
  ~TempFile() { std::filesystem::remove(path_); }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  const std::string& path() const { return path_; }

  void truncate(std::uint64_t size) const { REQUIRE(::truncate(path_.c_str(), static_cast<off_t>(size)) == 0); }
  // Drops the file's clean pages that no process has mapped in; true when some were dropped.
  bool evict() const {
    const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    REQUIRE(fd >= 0);
    const bool ok = ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0;
    ::close(fd);
    return ok;
  }

 private:
  static std::string fresh_path() {
    static std::atomic<int> n{0};
    return (std::filesystem::temp_directory_path() /
            ("maploc_populate_" + std::to_string(::getpid()) + "_" + std::to_string(n++)))
        .string();
  }
  void sync() const {
    const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    REQUIRE(fd >= 0);
    ::fsync(fd);
    ::close(fd);
  }
  std::string path_;
};

// A CPU storage of n bytes at `data`, owning nothing.
PlacedStorage cpu_storage(const void* data, std::uint64_t n) {
  PlacedStorage s;
  s.device = Device::cpu();
  s.data = const_cast<void*>(data);
  s.nbytes = n;
  return s;
}

// A private read-write mapping of a whole file, unmapped at scope end.
struct Mapping {
  explicit Mapping(const std::string& path, std::uint64_t n) : size(n) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    REQUIRE(fd >= 0);
    void* p = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    ::close(fd);
    REQUIRE(p != MAP_FAILED);
    base = static_cast<std::uint8_t*>(p);
  }
  ~Mapping() { ::munmap(base, size); }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  std::uint8_t* base = nullptr;
  std::uint64_t size = 0;
};

}  // namespace

TEST_CASE("populate: every fixture's storages resident and mapped, bytes and writability as without it",
          "[remap][populate]") {
  int files = 0;
  for (const auto& [file, manifest] : all_fixtures()) {
    INFO(file);
    const auto checkpoint = torch::Checkpoint::open(fixture("checkpoints/" + file));
    for (const bool writable : {false, true}) {
      INFO("writable " << writable);
      const auto plain = remap::load(checkpoint, options(HostMemory::kMappedView, writable, false));
      const auto populated = remap::load(checkpoint, options(HostMemory::kMappedView, writable, true));
      const Residency r = residency(populated);  // before anything below reads (and so maps) a byte
      CHECK(r.not_resident == 0);
      if (r.not_mapped) CHECK(*r.not_mapped == 0);
      REQUIRE(populated.storages().size() == plain.storages().size());
      for (std::size_t i = 0; i < plain.storages().size(); ++i) {
        INFO("storage " << i);
        const auto& s = populated.storages()[i];
        CHECK(s.writable == plain.storages()[i].writable);
        // Writable as asked: views of the read-only mapping stay read-only; copies
        // (big-endian, deflated) and copy-on-write views are writable.
        if (writable) {
          CHECK(s.writable);
        } else if (s.nbytes > 0 && s.data == checkpoint.storage_bytes(i).data()) {
          CHECK_FALSE(s.writable);
        }
        CHECK(populated.host_bytes(i) == plain.host_bytes(i));
      }
      for (std::size_t t = 0; t < plain.tensors().size(); ++t) {
        if (!plain.tensors()[t].storage) continue;
        CHECK(populated.tensor_sha256(t) == plain.tensor_sha256(t));
      }
    }
    ++files;
  }
  CHECK(files >= 40);
}

TEST_CASE("populate: without it a fresh load leaves pages unmapped and out of memory, with it none",
          "[remap][populate]") {
  // The control half shows that the checks above can fail.
  const TempFile copy("shufflenet_v2_x0_5.t113.pt");
  const auto checkpoint = torch::Checkpoint::open(copy.path());
  const bool evicted = copy.evict();
  const auto plain = remap::load(checkpoint, options(HostMemory::kMappedView, true, false));
  const Residency before = residency(plain);
  if (before.not_mapped) {
    CHECK(*before.not_mapped > 0);  // a fresh copy-on-write mapping: nothing read, nothing mapped
  } else {
    WARN("/proc/self/pagemap cannot be read here: page-table checks skipped");
  }
  if (!evicted || before.not_resident == 0) WARN("the page cache kept the file (tmpfs?): mincore control skipped");

  auto o = options(HostMemory::kMappedView, true, true);
  o.host_threads = 2;
  const auto populated = remap::load(checkpoint, o);
  const Residency after = residency(populated);
  CHECK(after.not_resident == 0);
  if (after.not_mapped) CHECK(*after.not_mapped == 0);
  CHECK(residency(plain).not_mapped == before.not_mapped);  // populating one load maps nothing of another
}

TEST_CASE("populate is ignored for owned copies: still private, aligned and correct", "[remap][populate]") {
  for (const std::string file : {"shufflenet_v2_x0_5.t113.pt", "dtypes_be.t113.pt", "deflated.t113.pt"}) {
    INFO(file);
    const auto checkpoint = torch::Checkpoint::open(fixture("checkpoints/" + file));
    const auto manifest = read_json(fixture("checkpoints/" + file + ".manifest.json"));
    const auto loaded = remap::load(checkpoint, options(HostMemory::kOwnedCopy, false, true));
    for (std::size_t i = 0; i < loaded.storages().size(); ++i) {
      const auto& s = loaded.storages()[i];
      CHECK(s.writable);
      CHECK(reinterpret_cast<std::uintptr_t>(s.data) % 64 == 0);
      if (s.nbytes > 0) CHECK(s.data != checkpoint.storage_bytes(i).data());
    }
    for (const auto& t : manifest["tensors"]) {
      const std::string name = t["name"];
      INFO(name);
      const auto idx = loaded.find(name);
      REQUIRE(idx.has_value());
      CHECK(loaded.tensor_sha256(*idx) == t["sha256"].get<std::string>());
    }
  }
}

TEST_CASE("populate merges neighbouring storages into few madvise calls of at most 64 MiB", "[remap][populate]") {
  // Arithmetic only: these addresses are never touched.
  const std::uintptr_t base = std::uintptr_t{1} << 40, p = page();
  const auto at = [&](std::uintptr_t off) { return reinterpret_cast<const void*>(base + off); };
  std::vector<PlacedStorage> storages = {
      cpu_storage(at(p * 3 + 5), p * 2),       // pages 3-5
      cpu_storage(at(10), 100),                // page 0, out of order
      cpu_storage(at(200), 300),               // page 0 again
      cpu_storage(at(p * 5 + p - 1), 1),       // page 5: inside the first
      cpu_storage(at(p * 6 + 1), 10),          // page 6: touches it
      cpu_storage(at(p * 9), 150 * kMiB),      // after a gap of two pages; 150 MiB: three pieces
      cpu_storage(at(p * 8), 0),               // no bytes: nothing
  };
  PlacedStorage meta;
  meta.device = Device::meta();
  meta.nbytes = 1 << 20;
  storages.push_back(meta);
  const auto pieces = remap::detail::populate_pieces(storages);
  REQUIRE(pieces.size() == 5);
  CHECK(pieces[0].begin == base);
  CHECK(pieces[0].end == base + p);
  CHECK(pieces[1].begin == base + 3 * p);
  CHECK(pieces[1].end == base + 7 * p);
  CHECK(pieces[2].begin == base + 9 * p);
  CHECK(pieces[2].end - pieces[2].begin == 64 * kMiB);
  CHECK(pieces[3].end - pieces[3].begin == 64 * kMiB);
  CHECK(pieces[4].end == base + 9 * p + 150 * kMiB);

  // 20,000 small storages of one file: a handful of calls, not 20,000.
  const auto checkpoint = torch::Checkpoint::open(fixture("checkpoints/many_small_20k.t113.pt"));
  const auto loaded = remap::load(checkpoint, options(HostMemory::kMappedView, true, true));
  REQUIRE(loaded.storages().size() >= 20000);
  const auto merged = remap::detail::populate_pieces(loaded.storages());
  CHECK(merged.size() <= 4);
  CHECK(residency(loaded).not_resident == 0);
}

TEST_CASE("populate runs in parallel over a large file and names the storage the file no longer backs",
          "[remap][populate]") {
  // A sparse 160 MiB file: three storages in three 64 MiB-or-less pieces, 150 MiB in all.
  const TempFile file(160 * kMiB);
  const Mapping map(file.path(), 160 * kMiB);
  const std::vector<PlacedStorage> storages = {cpu_storage(map.base, 50 * kMiB),
                                               cpu_storage(map.base + 50 * kMiB + 100, 60 * kMiB - 100),
                                               cpu_storage(map.base + 120 * kMiB, 40 * kMiB)};
  const auto describe = [](std::size_t i) { return "storage '" + std::to_string(i) + "'"; };
  REQUIRE(remap::detail::populate_pieces(storages).size() == 3);
  SECTION("every page mapped") {
    remap::detail::populate_host(storages, 4, describe);
    for (const auto& s : storages) {
      CHECK(pages_not_resident(s.data, s.nbytes) == 0);
      const auto unmapped = pages_not_mapped(s.data, s.nbytes);
      if (unmapped) CHECK(*unmapped == 0);
    }
  }
  SECTION("truncated under the mapping") {
    file.truncate(100 * kMiB);  // storage 1 now ends past the end of the file, storage 2 lies wholly past it
    const Error e = error_of([&] { remap::detail::populate_host(storages, 4, describe); });
    INFO(e.what());
    CHECK(e.code() == ErrorCode::kRemapDevice);
    CHECK(e.stage() == Stage::kRemap);
    CHECK(e.message().find("storage '1'") != std::string::npos);
    CHECK(e.message().find("shorter") != std::string::npos);
  }
}

TEST_CASE("populate on a checkpoint truncated after open fails with kRemapDevice naming a storage",
          "[remap][populate]") {
  const TempFile copy("shufflenet_v2_x0_5.t113.pt");
  const auto checkpoint = torch::Checkpoint::open(copy.path());
  copy.truncate(64 << 10);
  for (const unsigned threads : {1u, 2u}) {
    auto o = options(HostMemory::kMappedView, false, true);
    o.host_threads = threads;
    const Error e = error_of([&] { remap::load(checkpoint, o); });
    INFO(e.what());
    CHECK(e.code() == ErrorCode::kRemapDevice);
    CHECK(e.message().find("storage '") != std::string::npos);
    CHECK(e.message().find(" of tensor '") != std::string::npos);
  }
}

}  // namespace maploc::test
