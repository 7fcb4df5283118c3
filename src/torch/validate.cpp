// validate.cpp - every tensor against its storage with checked arithmetic (§6.4, §10.3-§10.4).
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "state.h"

namespace maploc::torch {
namespace {

constexpr std::uint64_t kMaxI64 = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());

std::string dims(const std::vector<std::int64_t>& v) {
  std::string out = "[";
  for (std::size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + std::to_string(v[i]);
  return out + "]";
}

std::string describe(const Tensor& t) {
  return std::string(dtype_name(t.dtype)) + " shape " + dims(t.shape) + " stride " + dims(t.stride) +
         " storage_offset " + std::to_string(t.storage_offset);
}

void check_geometry(const Tensor& t, std::uint64_t max_rank) {
  if (t.shape.size() > max_rank) {
    fail(ErrorCode::kTorchBadTensor, "tensor '" + t.name + "' has rank " + std::to_string(t.shape.size()) +
                                         " (at most Limits::torch_max_rank = " + std::to_string(max_rank) + ")", t.name);
  }
  if (!t.stride.empty() && t.stride.size() != t.shape.size()) {
    fail(ErrorCode::kTorchBadTensor, "tensor '" + t.name + "': size and stride differ in rank", t.name);
  }
  for (auto d : t.shape) {
    if (d < 0) fail(ErrorCode::kTorchBadTensor, "tensor '" + t.name + "' has a negative size: " + describe(t), t.name);
  }
  for (auto s : t.stride) {
    if (s < 0) fail(ErrorCode::kTorchBadTensor, "tensor '" + t.name + "' has a negative stride: " + describe(t), t.name);
  }
  if (t.storage_offset < 0) {
    fail(ErrorCode::kTorchBadTensor, "tensor '" + t.name + "' has a negative storage_offset: " + describe(t), t.name);
  }
  // numel must fit int64 (torch's sizes are int64).
  std::uint64_t numel = 1;
  for (auto d : t.shape) {
    const auto u = static_cast<std::uint64_t>(d);
    if (u != 0 && numel > kMaxI64 / u) {
      fail(ErrorCode::kTorchBadTensor, "tensor '" + t.name + "': element count overflows int64: " + describe(t), t.name);
    }
    numel *= u;
  }
  // Its byte count too (a stride-0 view of 2^62 float32 elements is 2^64 bytes: torch saves and
  // loads it, but numel x element size wraps to 0 in 64 bits).
  const std::uint64_t es = element_size(t.dtype);
  if (numel > kMaxI64 / es) {
    fail(ErrorCode::kTorchBadTensor,
         "tensor '" + t.name + "': its byte count " + std::to_string(numel) + " elements x " + std::to_string(es) +
             " bytes overflows int64: " + describe(t),
         t.name);
  }
}

// Bytes [0, end) of the storage the tensor reaches: (offset + sum((size-1)*stride) + 1) * elsize.
// Returns false on overflow.
bool reach(const Tensor& t, std::uint64_t& end) {
  end = 0;
  for (auto d : t.shape) {
    if (d == 0) return true;  // an empty tensor reads nothing, whatever its offset
  }
  std::uint64_t last = static_cast<std::uint64_t>(t.storage_offset);
  for (std::size_t i = 0; i < t.shape.size(); ++i) {
    const auto extent = static_cast<std::uint64_t>(t.shape[i] - 1);
    const auto stride = static_cast<std::uint64_t>(t.stride[i]);
    if (extent != 0 && stride > kMaxI64 / extent) return false;
    if (extent * stride > kMaxI64 - last) return false;
    last += extent * stride;
  }
  if (last == kMaxI64) return false;
  const std::uint64_t es = element_size(t.dtype);
  if (last + 1 > kMaxI64 / es) return false;
  end = (last + 1) * es;
  return true;
}

// `what` names who refers to the storage ("tensor" or "storage") and `name` which one; the
// message is built only on failure (W1's 30,000 storages were 30,000 string concatenations).
void check_record(const Checkpoint::State& st, std::size_t s, std::string_view what, const std::string& name) {
  const Storage& storage = st.storages[s];
  if (st.present_bytes[s] == storage.nbytes) return;
  fail(ErrorCode::kTorchRecordSize,
       std::string(what) + " '" + name + "': storage '" + storage.key + "' has " + std::to_string(st.present_bytes[s]) +
           " bytes on disk, but its persistent id says numel " + std::to_string(storage.numel) + " x " +
           std::to_string(element_size(storage.dtype)) + " bytes (" + std::string(dtype_name(storage.dtype)) +
           ") = " + std::to_string(storage.nbytes) + " bytes",
       storage.record.empty() ? storage.key : storage.record, storage.file_offset);
}

}  // namespace

void require_inside(const Tensor& t, std::uint64_t available) {
  const auto refuse = [&](const std::string& why) {
    throw Error(ErrorCode::kInvalidArgument, Stage::kTorch,
                "tensor '" + t.name + "' (" + describe(t) + ") " + why +
                    "; pass a tensor of the checkpoint the bytes come from",
                std::nullopt, t.name);
  };
  if (t.stride.size() != t.shape.size()) refuse("has a stride of another rank than its size");
  for (std::size_t i = 0; i < t.shape.size(); ++i) {
    if (t.shape[i] < 0 || t.stride[i] < 0) refuse("has a negative size or stride");
  }
  if (t.storage_offset < 0) refuse("has a negative storage_offset");
  std::uint64_t end = 0;
  if (!reach(t, end)) refuse("reaches past 2^63 elements");
  if (end > available) refuse("reaches byte " + std::to_string(end) + " of a storage of " + std::to_string(available));
}

void validate(Checkpoint::State& st) {
  std::vector<bool> checked(st.storages.size(), false);
  for (const Tensor& t : st.tensors) {
    check_geometry(t, st.options.limits.torch_max_rank);
    if (!t.storage) continue;
    const std::size_t s = *t.storage;
    if (!checked[s]) {
      check_record(st, s, "tensor", t.name);
      checked[s] = true;
    }
    std::uint64_t end = 0;
    if (!reach(t, end)) {
      fail(ErrorCode::kTorchTensorOutOfBounds,
           "tensor '" + t.name + "': its extent overflows int64 (" + describe(t) + ")", t.name);
    }
    if (end > st.storages[s].nbytes) {
      fail(ErrorCode::kTorchTensorOutOfBounds,
           "tensor '" + t.name + "' (" + describe(t) + ") reaches byte " + std::to_string(end) + " but storage '" +
               st.storages[s].key + "' has " + std::to_string(st.storages[s].nbytes) + " bytes",
           t.name);
    }
  }
  for (std::size_t s = 0; s < st.storages.size(); ++s) {
    if (!checked[s]) check_record(st, s, "storage", st.storages[s].key);
  }
}

}  // namespace maploc::torch
