// host_memory.cpp - host placements and reading placed storages back.
#include "remap/host_memory.h"

#include <cstdlib>
#include <vector>

#include "maploc/error.h"
#include "remap/cuda_backend.h"
#include "support/byteswap.h"

namespace maploc::remap::detail {

PlacedStorage host_copy(const Bytes& raw, std::size_t swap_unit, bool pinned, const std::string& who) {
  PlacedStorage out;
  out.device = Device::cpu();
  out.nbytes = raw.size();
  out.writable = true;
  if (raw.empty()) return out;
  void* p = nullptr;
  if (pinned) {
    out.owner = cuda_allocate_pinned(raw.size(), &p, who);
  } else {
    const std::size_t rounded = (raw.size() + 63) / 64 * 64;
    p = std::aligned_alloc(64, rounded);
    if (p == nullptr) {
      throw Error(ErrorCode::kRemapOutOfMemory, Stage::kRemap,
                  "cannot allocate " + std::to_string(raw.size()) + " host bytes for " + who);
    }
    out.owner = std::shared_ptr<void>(p, [](void* q) { std::free(q); });
  }
  maploc::detail::copy_swapped(static_cast<std::uint8_t*>(p), raw.data(), raw.size(), swap_unit);
  out.data = p;
  return out;
}

PlacedStorage host_view(const Bytes& raw) {
  PlacedStorage out;
  out.device = Device::cpu();
  out.nbytes = raw.size();
  out.data = const_cast<std::uint8_t*>(raw.data());
  out.writable = false;
  out.owner = std::make_shared<Bytes>(raw);
  return out;
}

PlacedStorage host_cow_view(const Bytes& cow, std::uint64_t file_offset, std::uint64_t nbytes) {
  PlacedStorage out = host_view(cow.slice(static_cast<std::size_t>(file_offset), static_cast<std::size_t>(nbytes)));
  out.writable = true;  // private pages: writes never reach the file
  return out;
}

Bytes host_bytes_of(const PlacedStorage& placed, const std::string& who) {
  switch (placed.device.kind) {
    case Device::Kind::kCpu:
      return Bytes(placed.owner, static_cast<const std::uint8_t*>(placed.data), placed.nbytes);
    case Device::Kind::kCuda: {
      std::vector<std::uint8_t> host(placed.nbytes);
      cuda_download(placed.device.index, placed.data, host.data(), placed.nbytes, who);
      return Bytes::owned(std::move(host));
    }
    case Device::Kind::kMeta: break;
  }
  throw Error(ErrorCode::kInvalidArgument, Stage::kRemap,
              who + " was loaded on meta: it has a shape but no bytes (load it with another --map-location)");
}

}  // namespace maploc::remap::detail
