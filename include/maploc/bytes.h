// bytes.h - a read-only byte range that keeps its backing memory alive.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

namespace maploc {

/// A read-only view of bytes plus shared ownership of whatever holds them
/// (a file mapping or an owned buffer). Copies are cheap; the bytes stay
/// valid as long as any copy lives.
class Bytes {
 public:
  Bytes() = default;
  /// A view of [data, data+size) kept alive by owner.
  Bytes(std::shared_ptr<const void> owner, const std::uint8_t* data, std::size_t size)
      : owner_(std::move(owner)), data_(data), size_(size) {}
  /// Takes ownership of buffer.
  static Bytes owned(std::vector<std::uint8_t> buffer);

  const std::uint8_t* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  std::span<const std::uint8_t> span() const noexcept { return {data_, size_}; }
  std::string_view text() const noexcept {
    return {reinterpret_cast<const char*>(data_), size_};
  }
  /// A sub-range sharing this view's owner. Precondition: off <= size(), len <= size() - off.
  Bytes slice(std::size_t off, std::size_t len) const { return Bytes(owner_, data_ + off, len); }
  /// What keeps the bytes alive (may be null for bytes nobody owns).
  const std::shared_ptr<const void>& owner() const noexcept { return owner_; }

 private:
  std::shared_ptr<const void> owner_;
  const std::uint8_t* data_ = nullptr;
  std::size_t size_ = 0;
};

/// Receives a written file's bytes in order (the writers of torch/write.h and
/// torch/safetensors.h stream into one). May throw; the writer is then unusable.
using ByteSink = std::function<void(std::span<const std::uint8_t>)>;

}  // namespace maploc
