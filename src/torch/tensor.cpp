// tensor.cpp - names of tensor kinds and element counts.
#include "maploc/torch/tensor.h"

namespace maploc::torch {

std::string_view tensor_kind_name(TensorKind kind) noexcept {
  switch (kind) {
    case TensorKind::kDense: return "dense";
    case TensorKind::kStorage: return "storage";
    case TensorKind::kQuantized: return "quantized";
    case TensorKind::kSparseCoo: return "sparse_coo";
    case TensorKind::kSparseCsr: return "sparse_csr";
    case TensorKind::kSparseCsc: return "sparse_csc";
    case TensorKind::kSparseBsr: return "sparse_bsr";
    case TensorKind::kSparseBsc: return "sparse_bsc";
    case TensorKind::kNested: return "nested";
    case TensorKind::kMeta: return "meta";
    case TensorKind::kWrapperSubclass: return "wrapper_subclass";
    case TensorKind::kDeviceFromCpu: return "device_from_cpu";
    case TensorKind::kNestedJagged: return "nested_jagged";
  }
  return "dense";
}

std::uint64_t Tensor::numel() const noexcept {
  std::uint64_t n = 1;
  for (auto d : shape) n *= static_cast<std::uint64_t>(d < 0 ? 0 : d);
  return n;
}

}  // namespace maploc::torch
