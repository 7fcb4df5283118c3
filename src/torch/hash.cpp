// hash.cpp - a tensor's values in row-major order (tensor.contiguous() bytes, little-endian) and their SHA-256.
#include "maploc/torch/hash.h"

#include <algorithm>
#include <cstring>

#include "maploc/error.h"
#include "support/sha256.h"

#include "state.h"

namespace maploc::torch {
namespace {

constexpr std::size_t kChunkBytes = std::size_t{1} << 20;

void swap_in_place(std::uint8_t* p, std::size_t n, std::size_t unit) {
  for (std::size_t i = 0; i + unit <= n; i += unit) std::reverse(p + i, p + i + unit);
}

}  // namespace

void for_each_value_chunk(const Tensor& t, const Bytes& raw, ByteOrder order,
                          const std::function<void(std::span<const std::uint8_t>)>& sink) {
  if (!t.storage) {
    throw Error(ErrorCode::kInvalidArgument, Stage::kTorch, "tensor '" + t.name + "' has no storage to read",
                std::nullopt, t.name);
  }
  require_inside(t, raw.size());  // a caller may build any Tensor: every offset below stays inside raw
  if (t.numel() == 0) return;
  const std::size_t es = element_size(t.dtype);
  const std::size_t unit = order == ByteOrder::kBig ? swap_unit(t.dtype) : 1;
  const std::size_t rank = t.shape.size();

  // Trailing dims that are laid out contiguously form one run of bytes.
  std::size_t k = rank;
  std::uint64_t run = 1;
  while (k > 0 && (t.shape[k - 1] == 1 || static_cast<std::uint64_t>(t.stride[k - 1]) == run)) {
    run *= static_cast<std::uint64_t>(t.shape[k - 1]);
    --k;
  }
  const std::size_t run_bytes = static_cast<std::size_t>(run * es);

  std::vector<std::uint8_t> buf;
  buf.reserve(std::min(kChunkBytes, std::max(run_bytes, es)));
  auto flush = [&] {
    if (buf.empty()) return;
    if (unit > 1) swap_in_place(buf.data(), buf.size(), unit);
    sink(buf);
    buf.clear();
  };
  auto emit = [&](std::uint64_t elem_offset) {
    const std::uint8_t* src = raw.data() + elem_offset * es;
    if (run_bytes >= kChunkBytes && unit == 1) {
      flush();
      sink({src, run_bytes});  // large contiguous runs go out zero-copy
      return;
    }
    std::size_t done = 0;
    while (done < run_bytes) {
      const std::size_t n = std::min(run_bytes - done, kChunkBytes - buf.size());
      buf.insert(buf.end(), src + done, src + done + n);
      done += n;
      if (buf.size() == kChunkBytes) flush();
    }
  };

  // Odometer over the outer dims [0, k); validated bounds keep every offset inside raw.
  std::vector<std::int64_t> idx(k, 0);
  std::uint64_t base = static_cast<std::uint64_t>(t.storage_offset);
  while (true) {
    emit(base);
    std::size_t d = k;
    while (d > 0) {
      --d;
      if (++idx[d] < t.shape[d]) {
        base += static_cast<std::uint64_t>(t.stride[d]);
        break;
      }
      base -= static_cast<std::uint64_t>(t.stride[d]) * static_cast<std::uint64_t>(t.shape[d] - 1);
      idx[d] = 0;
      if (d == 0) {
        flush();
        return;
      }
    }
    if (k == 0) break;
  }
  flush();
}

std::vector<std::uint8_t> contiguous_bytes(const Checkpoint& checkpoint, const Tensor& tensor) {
  std::vector<std::uint8_t> out;
  if (!tensor.storage) return out;
  const Bytes raw = checkpoint.storage_bytes(*tensor.storage);
  for_each_value_chunk(tensor, raw, checkpoint.byteorder(),
                       [&](std::span<const std::uint8_t> c) { out.insert(out.end(), c.begin(), c.end()); });
  return out;
}

std::string tensor_sha256(const Checkpoint& checkpoint, const Tensor& tensor) {
  Sha256 h;
  if (tensor.storage) {
    const Bytes raw = checkpoint.storage_bytes(*tensor.storage);
    for_each_value_chunk(tensor, raw, checkpoint.byteorder(), [&](std::span<const std::uint8_t> c) { h.update(c); });
  }
  return h.finish_hex();
}

}  // namespace maploc::torch
