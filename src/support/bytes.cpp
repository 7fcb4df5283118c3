// bytes.cpp - Bytes that own their buffer.
#include "maploc/bytes.h"

namespace maploc {

Bytes Bytes::owned(std::vector<std::uint8_t> buffer) {
  auto holder = std::make_shared<const std::vector<std::uint8_t>>(std::move(buffer));
  const std::uint8_t* data = holder->data();
  std::size_t size = holder->size();
  return Bytes(std::move(holder), data, size);
}

}  // namespace maploc
