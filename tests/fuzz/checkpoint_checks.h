// checkpoint_checks.h - the invariants fuzz_checkpoint and fuzz_safetensors check on every
// checkpoint maploc accepts: tensors inside storages, storages naming their bytes, CPU load sizes.
#pragma once

#include <cstdint>
#include <optional>

#include "fuzz_common.h"
#include "maploc/error.h"
#include "maploc/remap/loaded.h"
#include "maploc/torch/checkpoint.h"
#include "maploc/torch/dtype.h"

namespace maploc::fuzz {

// 128 bits hold any extent of 64-bit shapes and strides without overflow (a GCC/Clang extension).
__extension__ typedef unsigned __int128 U128;

// Last element index + 1 of a strided view, computed independently of src/torch
// with overflow checks; nullopt on overflow (the reader must then have refused).
inline std::optional<U128> extent_elements(const torch::Tensor& t) {
  if (t.storage_offset < 0) return std::nullopt;
  U128 last = static_cast<std::uint64_t>(t.storage_offset);
  for (std::size_t i = 0; i < t.shape.size(); ++i) {
    if (t.shape[i] == 0) return 0;  // empty: touches no element
  }
  for (std::size_t i = 0; i < t.shape.size(); ++i) {
    const std::int64_t stride = i < t.stride.size() ? t.stride[i] : 0;
    if (stride < 0 || t.shape[i] < 0) return std::nullopt;
    last += static_cast<U128>(t.shape[i] - 1) * static_cast<std::uint64_t>(stride);
  }
  return last + 1;
}

inline void check_checkpoint(const torch::Checkpoint& ckpt) {
  const auto& storages = ckpt.storages();
  for (const auto& s : storages) {
    // Every storage names where its bytes are: a zip record, "storages/<key>"
    // of a legacy or tar stream, a safetensors tensor (views: their root's).
    if (s.record.empty() && !s.view_of) invariant_failed("storage without a record");
    const std::uint64_t es = torch::element_size(s.dtype);
    if (es == 0 || s.nbytes % es != 0 || s.nbytes / es != s.numel) {
      invariant_failed("storage nbytes is not numel x element size");
    }
    if (s.view_of && *s.view_of >= storages.size()) invariant_failed("storage view of a missing storage");
  }
  for (const auto& t : ckpt.tensors()) {
    for (const auto& c : t.components) {
      if (c.tensor >= ckpt.tensors().size()) invariant_failed("component index out of range");
    }
    if (!t.storage) continue;
    if (*t.storage >= storages.size()) invariant_failed("tensor names a missing storage");
    const auto& s = storages[*t.storage];
    auto extent = extent_elements(t);
    if (!extent) invariant_failed("tensor geometry overflows yet was accepted");
    const std::uint64_t es = torch::element_size(t.dtype);
    if (es == 0) continue;
    if (*extent * es > s.nbytes) invariant_failed("tensor reaches past the end of its storage");
  }
  for (std::size_t i = 0; i < storages.size(); ++i) {
    try {
      Bytes b = ckpt.storage_bytes(i);
      if (b.size() != storages[i].nbytes) invariant_failed("storage_bytes size differs from nbytes");
    } catch (const Error&) {
      // a deflated record may still fail to inflate (reported, not a crash)
    }
  }
  (void)ckpt.unknown_globals();
}

inline void check_load(const torch::Checkpoint& ckpt) {
  static const remap::DeviceInventory kNoGpu{};
  remap::LoadOptions options;
  options.map = remap::MapLocation::all_to("cpu");
  options.inventory = &kNoGpu;
  auto loaded = remap::load(ckpt, options);
  if (loaded.storages().size() != ckpt.storages().size()) invariant_failed("load lost storages");
  for (std::size_t i = 0; i < loaded.storages().size(); ++i) {
    const auto& p = loaded.storages()[i];
    if (p.nbytes != ckpt.storages()[i].nbytes) invariant_failed("placed storage has the wrong size");
    if (p.nbytes != 0 && p.data == nullptr) invariant_failed("placed storage without data");
  }
  // Hash a bounded number of small tensors: reads every element through the placed copy.
  std::uint64_t budget = std::uint64_t{1} << 22;
  for (std::size_t i = 0; i < loaded.tensors().size(); ++i) {
    const auto& t = loaded.tensors()[i];
    if (!t.storage) continue;
    const std::uint64_t n = t.numel();
    if (n > budget) break;
    budget -= n;
    (void)loaded.tensor_sha256(i);
  }
}


/// Reads the input as a checkpoint under tight limits and checks every invariant.
inline void read_and_check(const std::uint8_t* data, std::size_t size) {
  torch::Options options;
  options.limits = fuzz_limits();
  options.diagnostics = [](std::string_view) {};
  try {
    auto ckpt = torch::Checkpoint::from_file(as_file(data, size), options);
    check_checkpoint(ckpt);
    check_load(ckpt);
  } catch (const Error&) {
  }
}

}  // namespace maploc::fuzz
