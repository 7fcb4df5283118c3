// dtype.cpp - the dtype table: torch names, element sizes, storage class names (§4.3-§4.5).
#include "maploc/torch/dtype.h"

#include <array>

namespace maploc::torch {
namespace {

struct DTypeInfo {
  DType dtype;
  std::string_view name;         // torch's canonical name
  std::uint8_t size;             // torch._utils._element_size
  std::uint8_t swap;             // byte-swap unit (§1, UntypedStorage.byteswap)
  std::string_view python_storage; // _dtype_to_storage_type_map name, empty if none
  std::string_view cpp_storage;    // c10::toString(ScalarType) + "Storage", empty if none
};

// One row per DType, in enum order (checked by a static_assert below).
constexpr std::array<DTypeInfo, kDTypeCount> kTable{{
    {DType::kFloat64, "float64", 8, 8, "DoubleStorage", "DoubleStorage"},
    {DType::kFloat32, "float32", 4, 4, "FloatStorage", "FloatStorage"},
    {DType::kFloat16, "float16", 2, 2, "HalfStorage", "HalfStorage"},
    {DType::kBFloat16, "bfloat16", 2, 2, "BFloat16Storage", "BFloat16Storage"},
    {DType::kComplex32, "complex32", 4, 2, "", "ComplexHalfStorage"},
    {DType::kComplex64, "complex64", 8, 4, "ComplexFloatStorage", "ComplexFloatStorage"},
    {DType::kComplex128, "complex128", 16, 8, "ComplexDoubleStorage", "ComplexDoubleStorage"},
    {DType::kUInt8, "uint8", 1, 1, "ByteStorage", "ByteStorage"},
    {DType::kInt8, "int8", 1, 1, "CharStorage", "CharStorage"},
    {DType::kInt16, "int16", 2, 2, "ShortStorage", "ShortStorage"},
    {DType::kInt32, "int32", 4, 4, "IntStorage", "IntStorage"},
    {DType::kInt64, "int64", 8, 8, "LongStorage", "LongStorage"},
    {DType::kBool, "bool", 1, 1, "BoolStorage", "BoolStorage"},
    {DType::kQInt8, "qint8", 1, 1, "QInt8Storage", "QInt8Storage"},
    {DType::kQUInt8, "quint8", 1, 1, "QUInt8Storage", "QUInt8Storage"},
    {DType::kQInt32, "qint32", 4, 4, "QInt32Storage", "QInt32Storage"},
    {DType::kQUInt4x2, "quint4x2", 1, 1, "QUInt4x2Storage", "QUInt4x2Storage"},
    {DType::kQUInt2x4, "quint2x4", 1, 1, "QUInt2x4Storage", "QUInt2x4Storage"},
    {DType::kFloat8_e5m2, "float8_e5m2", 1, 1, "", "Float8_e5m2Storage"},
    {DType::kFloat8_e4m3fn, "float8_e4m3fn", 1, 1, "", "Float8_e4m3fnStorage"},
    {DType::kFloat8_e5m2fnuz, "float8_e5m2fnuz", 1, 1, "", "Float8_e5m2fnuzStorage"},
    {DType::kFloat8_e4m3fnuz, "float8_e4m3fnuz", 1, 1, "", "Float8_e4m3fnuzStorage"},
    {DType::kFloat8_e8m0fnu, "float8_e8m0fnu", 1, 1, "", "Float8_e8m0fnuStorage"},
    {DType::kFloat4_e2m1fn_x2, "float4_e2m1fn_x2", 1, 1, "", "Float4_e2m1fn_x2Storage"},
    {DType::kBits8, "bits8", 1, 1, "", "Bits8Storage"},
    {DType::kBits16, "bits16", 2, 2, "", "Bits16Storage"},
    {DType::kBits1x8, "bits1x8", 1, 1, "", "Bits1x8Storage"},
    {DType::kBits2x4, "bits2x4", 1, 1, "", "Bits2x4Storage"},
    {DType::kBits4x2, "bits4x2", 1, 1, "", "Bits4x2Storage"},
    {DType::kUInt16, "uint16", 2, 2, "", "UInt16Storage"},
    {DType::kUInt32, "uint32", 4, 4, "", "UInt32Storage"},
    {DType::kUInt64, "uint64", 8, 8, "", "UInt64Storage"},
    {DType::kUInt1, "uint1", 1, 1, "", ""},
    {DType::kUInt2, "uint2", 1, 1, "", ""},
    {DType::kUInt3, "uint3", 1, 1, "", ""},
    {DType::kUInt4, "uint4", 1, 1, "", ""},
    {DType::kUInt5, "uint5", 1, 1, "", ""},
    {DType::kUInt6, "uint6", 1, 1, "", ""},
    {DType::kUInt7, "uint7", 1, 1, "", ""},
    {DType::kInt1, "int1", 1, 1, "", ""},
    {DType::kInt2, "int2", 1, 1, "", ""},
    {DType::kInt3, "int3", 1, 1, "", ""},
    {DType::kInt4, "int4", 1, 1, "", ""},
    {DType::kInt5, "int5", 1, 1, "", ""},
    {DType::kInt6, "int6", 1, 1, "", ""},
    {DType::kInt7, "int7", 1, 1, "", ""},
}};

constexpr bool table_in_enum_order() {
  for (std::size_t i = 0; i < kTable.size(); ++i) {
    if (static_cast<std::size_t>(kTable[i].dtype) != i) return false;
  }
  return true;
}
static_assert(table_in_enum_order(), "kTable rows must follow the DType enum");

const DTypeInfo& info(DType dtype) noexcept { return kTable[static_cast<std::size_t>(dtype)]; }

}  // namespace

std::string_view dtype_name(DType dtype) noexcept { return info(dtype).name; }

std::optional<DType> dtype_from_name(std::string_view name) noexcept {
  if (name.substr(0, 6) == "torch.") name.remove_prefix(6);
  for (const auto& row : kTable) {
    if (row.name == name) return row.dtype;
  }
  return std::nullopt;
}

std::size_t element_size(DType dtype) noexcept { return info(dtype).size; }

std::size_t swap_unit(DType dtype) noexcept { return info(dtype).swap; }

std::string_view python_storage_name(DType dtype) noexcept { return info(dtype).python_storage; }

std::optional<DType> dtype_from_storage_type(std::string_view module, std::string_view name) noexcept {
  if (name == "UntypedStorage" && (module == "torch.storage" || module == "torch")) return DType::kUInt8;
  // torch.cuda.FloatStorage and friends are never written (§4.4) but are
  // storage classes all the same; the location tag carries the device.
  if (module != "torch" && module != "torch.cuda") return std::nullopt;
  for (const auto& row : kTable) {
    if ((!row.python_storage.empty() && row.python_storage == name) ||
        (!row.cpp_storage.empty() && row.cpp_storage == name)) {
      return row.dtype;
    }
  }
  return std::nullopt;
}

}  // namespace maploc::torch
