// hash.cpp - a tensor's values in row-major order (tensor.contiguous() bytes, little-endian) and their SHA-256.
#include "maploc/torch/hash.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "maploc/error.h"
#include "support/sha256.h"

#include "state.h"

namespace maploc::torch {
namespace {

constexpr std::size_t kChunkBytes = std::size_t{1} << 20;

std::string dims(const std::vector<std::int64_t>& v) {
  std::string out = "[";
  for (std::size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + std::to_string(v[i]);
  return out + "]";
}

// An expanded view (stride 0, overlapping strides) yields more values than the storage elements
// it reaches: torch.zeros(1).expand(2**62) is 2^64 bytes of values from 4 stored bytes. Those
// are bounded by Limits::torch_max_expanded_bytes before the first byte is produced; a view
// that reads each stored element at most once is bounded by the file. Requires a tensor that
// passed require_inside (its reach fits int64).
void require_expansion_within(const Tensor& t, std::uint64_t limit) {
  const std::uint64_t es = element_size(t.dtype);
  std::uint64_t span = 1;  // storage elements between the first and the last value, inclusive
  for (std::size_t i = 0; i < t.shape.size(); ++i) {
    span += static_cast<std::uint64_t>(t.shape[i] - 1) * static_cast<std::uint64_t>(t.stride[i]);
  }
  std::uint64_t numel = 1;
  bool wraps = false;
  for (auto d : t.shape) {
    const auto u = static_cast<std::uint64_t>(d);
    if (u != 0 && numel > UINT64_MAX / u) wraps = true;
    numel *= u;
  }
  if (!wraps && numel <= span) return;  // not expanded
  const bool fits = !wraps && numel <= UINT64_MAX / es && numel * es <= limit;
  if (fits) return;
  throw Error(ErrorCode::kTorchLimitExpandedBytes, Stage::kTorch,
              "tensor '" + t.name + "' is an expanded view (shape " + dims(t.shape) + " stride " + dims(t.stride) +
                  ") whose values are " + (wraps || numel > UINT64_MAX / es
                                               ? std::string("more than 2^64")
                                               : std::to_string(numel * es)) +
                  " bytes from " + std::to_string(span * es) +
                  " stored bytes, more than Limits::torch_max_expanded_bytes (" + std::to_string(limit) +
                  "); raise it (maploc --limit torch_max_expanded_bytes=N) to copy or hash them",
              std::nullopt, t.name);
}

void swap_in_place(std::uint8_t* p, std::size_t n, std::size_t unit) {
  for (std::size_t i = 0; i + unit <= n; i += unit) std::reverse(p + i, p + i + unit);
}

}  // namespace

void for_each_value_chunk(const Tensor& t, const Bytes& raw, ByteOrder order,
                          const std::function<void(std::span<const std::uint8_t>)>& sink,
                          std::uint64_t max_expanded_bytes) {
  if (!t.storage) {
    throw Error(ErrorCode::kInvalidArgument, Stage::kTorch, "tensor '" + t.name + "' has no storage to read",
                std::nullopt, t.name);
  }
  require_inside(t, raw.size());  // a caller may build any Tensor: every offset below stays inside raw
  if (t.numel() == 0) return;
  const std::size_t es = element_size(t.dtype);
  require_expansion_within(t, max_expanded_bytes);
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
  for_each_value_chunk(
      tensor, raw, checkpoint.byteorder(),
      [&](std::span<const std::uint8_t> c) { out.insert(out.end(), c.begin(), c.end()); },
      checkpoint.limits().torch_max_expanded_bytes);
  return out;
}

std::string tensor_sha256(const Checkpoint& checkpoint, const Tensor& tensor) {
  Sha256 h;
  if (tensor.storage) {
    const Bytes raw = checkpoint.storage_bytes(*tensor.storage);
    for_each_value_chunk(
        tensor, raw, checkpoint.byteorder(), [&](std::span<const std::uint8_t> c) { h.update(c); },
        checkpoint.limits().torch_max_expanded_bytes);
  }
  return h.finish_hex();
}

}  // namespace maploc::torch
