// sha256_libcrypto.cpp - maploc::Sha256 over OpenSSL's EVP digest interface (libcrypto).
#include <openssl/evp.h>

#include <new>
#include <utility>

#include "support/sha256.h"

namespace maploc {
namespace {

EVP_MD_CTX* ctx_of(void* p) { return static_cast<EVP_MD_CTX*>(p); }

// With a live context and the built-in SHA-256, libcrypto's EVP calls fail
// only when they cannot allocate.
[[noreturn]] void fail() { throw std::bad_alloc(); }

// SHA-256 fetched from the default provider once: EVP_sha256() makes every
// EVP_DigestInit_ex fetch it again under a lock, which threads hashing many
// small tensors contend on (docs/performance.md, "Why the code is shaped so").
const EVP_MD* sha256_method() {
  static EVP_MD* const md = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  if (md == nullptr) fail();
  return md;
}

}  // namespace

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
  if (!ctx_) fail();
  if (EVP_DigestInit_ex(ctx_of(ctx_), sha256_method(), nullptr) != 1) {
    EVP_MD_CTX_free(ctx_of(ctx_));
    fail();
  }
}

Sha256::~Sha256() { EVP_MD_CTX_free(ctx_of(ctx_)); }

Sha256::Sha256(Sha256&& other) noexcept : ctx_(std::exchange(other.ctx_, nullptr)) {}

Sha256& Sha256::operator=(Sha256&& other) noexcept {
  if (this != &other) {
    EVP_MD_CTX_free(ctx_of(ctx_));
    ctx_ = std::exchange(other.ctx_, nullptr);
  }
  return *this;
}

void Sha256::update(std::span<const std::uint8_t> data) {
  if (data.empty()) return;
  if (EVP_DigestUpdate(ctx_of(ctx_), data.data(), data.size()) != 1) fail();
}

std::array<std::uint8_t, 32> Sha256::finish() {
  std::array<std::uint8_t, 32> out{};
  unsigned int n = 0;
  if (EVP_DigestFinal_ex(ctx_of(ctx_), out.data(), &n) != 1 || n != out.size()) fail();
  return out;
}

std::string Sha256::finish_hex() {
  const auto digest = finish();
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(64, '0');
  for (std::size_t i = 0; i < digest.size(); ++i) {
    out[2 * i] = kHex[digest[i] >> 4];
    out[2 * i + 1] = kHex[digest[i] & 15];
  }
  return out;
}

std::string Sha256::hex(std::span<const std::uint8_t> data) {
  Sha256 s;
  s.update(data);
  return s.finish_hex();
}

}  // namespace maploc
