// sha256.h - SHA-256 (FIPS 180-4), used to compare bytes with torch-made manifests.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace maploc {

/// Incremental SHA-256, computed by OpenSSL's libcrypto (which uses the CPU's
/// SHA instructions where it has them); libcrypto stays out of this header.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(Sha256&& other) noexcept;
  Sha256& operator=(Sha256&& other) noexcept;
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void update(std::span<const std::uint8_t> data);
  /// Finishes and returns the 32-byte digest; the object must not be updated after.
  std::array<std::uint8_t, 32> finish();
  /// finish() as 64 lower-case hex digits.
  std::string finish_hex();
  /// Lower-case hex of the digest of data.
  static std::string hex(std::span<const std::uint8_t> data);

 private:
  void* ctx_;  ///< libcrypto's EVP_MD_CTX
};

}  // namespace maploc
