// dlpack.h - the tensors of a Loaded handed out as DLPack tensors, zero-copy, keeping their storage alive.
#pragma once

#include <cstddef>
#include <optional>

#include <dlpack/dlpack.h>  // Debian's libdlpack-dev (third_party/README.md)

#include "maploc/remap/loaded.h"
#include "maploc/torch/dtype.h"

/// DLPack >= 1.0 headers define DLManagedTensorVersioned; MAPLOC_DLPACK_VERSIONED is 1 when the
/// header maploc was built against has it (the to_dlpack_versioned() overload exists), else 0.
#if defined(DLPACK_MAJOR_VERSION) && DLPACK_MAJOR_VERSION >= 1
#define MAPLOC_DLPACK_VERSIONED 1
#else
#define MAPLOC_DLPACK_VERSIONED 0
#endif

namespace maploc::remap {

/// DLPack's code for a torch dtype, nullopt where the DLPack header maploc was
/// built against has none. float32/64/16: kDLFloat; bfloat16: kDLBfloat;
/// complex32/64/128: kDLComplex with 32/64/128 bits; int8-64: kDLInt;
/// uint8-64: kDLUInt. bool: kDLBool (DLPack >= 0.8), or {kDLUInt, 8} under an
/// older header, as torch before 1.12 exported it (values 0 and 1; numpy and
/// torch then see uint8). float8 kinds and float4_e2m1fn_x2: DLPack >= 1.1's
/// kDLFloat8_* / kDLFloat4_e2m1fn codes (nullopt under older headers). No
/// DLPack code: quantized, bits*, and the sub-byte uint1-7 / int1-7.
std::optional<DLDataType> dlpack_dtype(torch::DType dtype) noexcept;

/// Tensor `tensor` (an index into loaded.tensors()) as a DLManagedTensor that
/// the caller owns and releases by calling its `deleter` (once). Zero-copy:
/// `data` points at the tensor's first element in the placed storage (the
/// storage offset applied to the pointer, `byte_offset` 0, as torch's own
/// exporter does), `strides` are in elements and always set, and the device is
/// kDLCPU, kDLCUDAHost (pinned host copies) or {kDLCUDA, index}. The tensor
/// holds its placed storage by shared ownership: it stays valid after
/// `loaded` is destroyed or moved elsewhere with to(), and tensors over one
/// storage share it. Mapped views are read-only pages unless loaded with
/// `writable`: a consumer must not write to them.
/// Raises kInvalidArgument naming the tensor for an index out of range, and
/// kTorchNotConvertible naming the tensor for what DLPack cannot describe: a
/// dtype without a DLPack code, a lazy conj or neg bit, quantized, sparse,
/// nested and other composite or storage-less tensors, and meta placement.
DLManagedTensor* to_dlpack(const Loaded& loaded, std::size_t tensor);

#if MAPLOC_DLPACK_VERSIONED
/// The same as a DLManagedTensorVersioned (DLPack >= 1.0): version set to the
/// header's, DLPACK_FLAG_BITMASK_READ_ONLY set unless the storage is writable.
DLManagedTensorVersioned* to_dlpack_versioned(const Loaded& loaded, std::size_t tensor);
#endif

}  // namespace maploc::remap
