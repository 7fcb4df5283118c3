// dlpack.cpp - a Loaded's tensors as DLPack tensors: dtype codes, devices, geometry and shared ownership.
#include "maploc/remap/dlpack.h"

#include <memory>
#include <string>
#include <vector>

#include "maploc/error.h"

// kDLBool arrived in DLPack 0.8, the float8/float4 codes in 1.1.
#if defined(DLPACK_MAJOR_VERSION) || (defined(DLPACK_VERSION) && DLPACK_VERSION >= 80)
#define MAPLOC_DLPACK_HAS_BOOL 1
#else
#define MAPLOC_DLPACK_HAS_BOOL 0
#endif
#if defined(DLPACK_MAJOR_VERSION) && (DLPACK_MAJOR_VERSION > 1 || DLPACK_MINOR_VERSION >= 1)
#define MAPLOC_DLPACK_HAS_FLOAT8 1
#else
#define MAPLOC_DLPACK_HAS_FLOAT8 0
#endif

namespace maploc::remap {
namespace {

using torch::DType;

DLDataType code(std::uint8_t type_code, std::uint8_t bits, std::uint16_t lanes = 1) {
  DLDataType out;
  out.code = type_code;
  out.bits = bits;
  out.lanes = lanes;
  return out;
}

// What one exported tensor owns: its geometry arrays and a share of the placed storage.
struct Holder {
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> strides;
  std::shared_ptr<void> owner;
};

[[noreturn]] void not_convertible(const torch::Tensor& t, const std::string& why) {
  throw Error(ErrorCode::kTorchNotConvertible, Stage::kRemap,
              "tensor '" + t.name + "' cannot be exported as DLPack: " + why, std::nullopt, t.name);
}

std::string dtype_hint(DType dtype) {
  switch (dtype) {
    case DType::kFloat8_e5m2: case DType::kFloat8_e4m3fn: case DType::kFloat8_e5m2fnuz:
    case DType::kFloat8_e4m3fnuz: case DType::kFloat8_e8m0fnu: case DType::kFloat4_e2m1fn_x2:
      return " in the DLPack header maploc was built against (DLPack >= 1.1 names it: rebuild maploc against it)";
    default:
      return "";
  }
}

// Fills `out` with the view of tensor `index`; returns the storage owner to keep.
std::shared_ptr<void> describe(const Loaded& loaded, std::size_t index, Holder& holder, DLTensor& out) {
  const auto& tensors = loaded.tensors();
  if (index >= tensors.size()) {
    throw Error(ErrorCode::kInvalidArgument, Stage::kRemap,
                "tensor index " + std::to_string(index) + " is out of range: the checkpoint has " +
                    std::to_string(tensors.size()) + " tensors");
  }
  const torch::Tensor& t = tensors[index];
  if (t.kind != torch::TensorKind::kDense && t.kind != torch::TensorKind::kStorage) {
    not_convertible(t, "it is a " + std::string(torch::tensor_kind_name(t.kind)) +
                           " tensor, which DLPack cannot describe; export its components instead");
  }
  if (!t.storage) not_convertible(t, "it has no storage");
  if (t.conj) not_convertible(t, "it carries a lazy conjugate bit (DLPack has none); resolve it in torch first");
  if (t.neg) not_convertible(t, "it carries a lazy negation bit (DLPack has none); resolve it in torch first");
  const auto dtype = dlpack_dtype(t.dtype);
  if (!dtype) {
    not_convertible(t, "DLPack has no code for dtype " + std::string(torch::dtype_name(t.dtype)) + dtype_hint(t.dtype));
  }
  const PlacedStorage& placed = loaded.storages()[*t.storage];
  switch (placed.device.kind) {
    case Device::Kind::kCpu:
      out.device = {placed.pinned ? kDLCUDAHost : kDLCPU, 0};
      break;
    case Device::Kind::kCuda:
      out.device = {kDLCUDA, placed.device.index};
      break;
    case Device::Kind::kMeta:
      not_convertible(t, "it is placed on meta, which holds no bytes; load it on cpu or cuda");
  }
  holder.shape = t.shape;
  holder.strides = t.stride;
  const auto offset = static_cast<std::uint64_t>(t.storage_offset) * torch::element_size(t.dtype);
  // Bounds were checked when the checkpoint was opened; an empty storage has no pointer.
  out.data = placed.data == nullptr ? nullptr : static_cast<char*>(placed.data) + offset;
  out.ndim = static_cast<std::int32_t>(holder.shape.size());
  out.dtype = *dtype;
  out.shape = holder.shape.data();
  out.strides = holder.strides.data();
  out.byte_offset = 0;
  return placed.owner;
}

}  // namespace

std::optional<DLDataType> dlpack_dtype(DType dtype) noexcept {
  switch (dtype) {
    case DType::kFloat64: return code(kDLFloat, 64);
    case DType::kFloat32: return code(kDLFloat, 32);
    case DType::kFloat16: return code(kDLFloat, 16);
    case DType::kBFloat16: return code(kDLBfloat, 16);
    case DType::kComplex32: return code(kDLComplex, 32);
    case DType::kComplex64: return code(kDLComplex, 64);
    case DType::kComplex128: return code(kDLComplex, 128);
    case DType::kUInt8: return code(kDLUInt, 8);
    case DType::kUInt16: return code(kDLUInt, 16);
    case DType::kUInt32: return code(kDLUInt, 32);
    case DType::kUInt64: return code(kDLUInt, 64);
    case DType::kInt8: return code(kDLInt, 8);
    case DType::kInt16: return code(kDLInt, 16);
    case DType::kInt32: return code(kDLInt, 32);
    case DType::kInt64: return code(kDLInt, 64);
#if MAPLOC_DLPACK_HAS_BOOL
    case DType::kBool: return code(kDLBool, 8);
#else
    case DType::kBool: return code(kDLUInt, 8);
#endif
#if MAPLOC_DLPACK_HAS_FLOAT8
    case DType::kFloat8_e5m2: return code(kDLFloat8_e5m2, 8);
    case DType::kFloat8_e4m3fn: return code(kDLFloat8_e4m3fn, 8);
    case DType::kFloat8_e5m2fnuz: return code(kDLFloat8_e5m2fnuz, 8);
    case DType::kFloat8_e4m3fnuz: return code(kDLFloat8_e4m3fnuz, 8);
    case DType::kFloat8_e8m0fnu: return code(kDLFloat8_e8m0fnu, 8);
    case DType::kFloat4_e2m1fn_x2: return code(kDLFloat4_e2m1fn, 4, 2);  // two 4-bit values per byte, as torch
#endif
    default: return std::nullopt;
  }
}

namespace {

// What one exported tensor owns: the DLPack struct and what keeps its bytes alive; its deleter frees both.
template <typename DL>
struct Exported {
  DL managed{};
  Holder holder;
};

template <typename DL>
Exported<DL>* export_tensor(const Loaded& loaded, std::size_t tensor) {
  auto m = std::make_unique<Exported<DL>>();
  m->holder.owner = describe(loaded, tensor, m->holder, m->managed.dl_tensor);
  m->managed.manager_ctx = m.get();
  m->managed.deleter = [](DL* self) { delete static_cast<Exported<DL>*>(self->manager_ctx); };
  return m.release();
}

}  // namespace

DLManagedTensor* to_dlpack(const Loaded& loaded, std::size_t tensor) {
  return &export_tensor<DLManagedTensor>(loaded, tensor)->managed;
}

#if MAPLOC_DLPACK_VERSIONED
DLManagedTensorVersioned* to_dlpack_versioned(const Loaded& loaded, std::size_t tensor) {
  DLManagedTensorVersioned& managed = export_tensor<DLManagedTensorVersioned>(loaded, tensor)->managed;
  managed.version.major = DLPACK_MAJOR_VERSION;
  managed.version.minor = DLPACK_MINOR_VERSION;
  const auto& t = loaded.tensors()[tensor];
  managed.flags = loaded.storages()[*t.storage].writable ? 0 : DLPACK_FLAG_BITMASK_READ_ONLY;
  return &managed;
}
#endif

}  // namespace maploc::remap
