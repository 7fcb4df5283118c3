// sha256.h - SHA-256 (FIPS 180-4), used to compare bytes with torch-made manifests.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace maploc {

/// Incremental SHA-256.
class Sha256 {
 public:
  Sha256();
  void update(std::span<const std::uint8_t> data);
  /// Finishes and returns the 32-byte digest; the object must not be updated after.
  std::array<std::uint8_t, 32> finish();
  /// finish() as 64 lower-case hex digits.
  std::string finish_hex();
  /// Lower-case hex of the digest of data.
  static std::string hex(std::span<const std::uint8_t> data);

 private:
  void block(const std::uint8_t* p);
  std::array<std::uint32_t, 8> h_;
  std::array<std::uint8_t, 64> buf_{};
  std::size_t buf_len_ = 0;
  std::uint64_t total_ = 0;
};

}  // namespace maploc
