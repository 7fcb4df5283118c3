// host_fill_test.cpp - the parallel host fill (pread into owned copies, copies and byte swaps from
// memory) on more than its 16 MiB threshold, so that its threads run (and TSan sees them).
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <vector>

#include "host_memory.h"

namespace maploc::test {

TEST_CASE("the parallel host fill reads, copies and swaps every piece where it belongs", "[remap]") {
  constexpr std::size_t kBytes = std::size_t{40} << 20;  // above the 16 MiB under which one thread fills
  std::vector<std::uint8_t> data(kBytes);
  for (std::size_t i = 0; i < kBytes; ++i) data[i] = static_cast<std::uint8_t>(i * 2654435761u >> 13);
  const auto path = std::filesystem::temp_directory_path() / ("maploc_host_fill_" + std::to_string(::getpid()));
  {
    std::FILE* f = std::fopen(path.c_str(), "wb");
    REQUIRE(f != nullptr);
    REQUIRE(std::fwrite(data.data(), 1, kBytes, f) == kBytes);
    std::fclose(f);
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  // Three destinations: a pread range of the file, the same bytes copied from memory, and swapped by 4.
  const std::size_t third = kBytes / 3 / 4 * 4;
  std::vector<std::uint8_t> a(third), b(third), c(third);
  const Bytes src(nullptr, data.data(), data.size());
  const std::vector<remap::detail::HostFill> fills = {
      {a.data(), src.slice(0, third), 1, 0},
      {b.data(), src.slice(third, third), 1, -1},
      {c.data(), src.slice(2 * third, third), 4, static_cast<std::int64_t>(2 * third)},
  };
  for (const unsigned threads : {1u, 4u}) {
    std::memset(a.data(), 0, third);
    std::memset(b.data(), 0, third);
    std::memset(c.data(), 0, third);
    remap::detail::fill_host(fills, fd, threads);
    CHECK(std::memcmp(a.data(), data.data(), third) == 0);
    CHECK(std::memcmp(b.data(), data.data() + third, third) == 0);
    bool swapped = true;
    for (std::size_t i = 0; i < third && swapped; i += 4) {
      for (std::size_t k = 0; k < 4; ++k) swapped = swapped && c[i + k] == data[2 * third + i + 3 - k];
    }
    CHECK(swapped);
  }
  ::close(fd);
  std::filesystem::remove(path);
}

}  // namespace maploc::test
