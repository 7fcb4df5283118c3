// dtype.h - torch scalar types: names, element sizes and the storage classes that carry them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace maploc::torch {

/// Every dtype a checkpoint can name (pytorch-format.md §4.4-§4.5). The
/// enumerator spells the torch name; dtype_name() gives it exactly.
enum class DType : std::uint8_t {
  kFloat64, kFloat32, kFloat16, kBFloat16,
  kComplex32, kComplex64, kComplex128,
  kUInt8, kInt8, kInt16, kInt32, kInt64, kBool,
  kQInt8, kQUInt8, kQInt32, kQUInt4x2, kQUInt2x4,
  kFloat8_e5m2, kFloat8_e4m3fn, kFloat8_e5m2fnuz, kFloat8_e4m3fnuz, kFloat8_e8m0fnu,
  kFloat4_e2m1fn_x2,
  kBits8, kBits16, kBits1x8, kBits2x4, kBits4x2,
  kUInt16, kUInt32, kUInt64,
  kUInt1, kUInt2, kUInt3, kUInt4, kUInt5, kUInt6, kUInt7,
  kInt1, kInt2, kInt3, kInt4, kInt5, kInt6, kInt7,
};

/// Number of DType enumerators.
inline constexpr std::size_t kDTypeCount = static_cast<std::size_t>(DType::kInt7) + 1;

/// torch's canonical name without the "torch." prefix: "float32", "complex32", "float8_e4m3fn".
std::string_view dtype_name(DType dtype) noexcept;

/// Parses a canonical name as dtype_name() prints it (also accepted with a
/// "torch." prefix). nullopt for anything else.
std::optional<DType> dtype_from_name(std::string_view name) noexcept;

/// Bytes per element as torch._utils._element_size computes it (sub-byte
/// and packed types count as 1; complex32 is 4).
std::size_t element_size(DType dtype) noexcept;

/// Unit in which a big-endian value is byte-swapped: the element size, half
/// of it for complex types (each component on its own), 1 for byte types.
std::size_t swap_unit(DType dtype) noexcept;

/// Resolves a storage class named in a persistent id, given its module and
/// name: Python's "torch"."FloatStorage" (§4.4), the C++ writers'
/// "torch"."Float8_e5m2Storage" / "ComplexHalfStorage" (§3.2), and
/// "torch.storage"."UntypedStorage" (uint8). nullopt when unknown.
std::optional<DType> dtype_from_storage_type(std::string_view module, std::string_view name) noexcept;

/// The class torch.save names for a dtype's typed storage ("FloatStorage",
/// module "torch"), empty for dtypes saved as torch.storage.UntypedStorage
/// with _rebuild_tensor_v3 (float8, uint16, complex32, ...).
std::string_view python_storage_name(DType dtype) noexcept;

}  // namespace maploc::torch
