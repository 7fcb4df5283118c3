// tensor.h - one tensor of a checkpoint: dtype, geometry and the storage it views.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "maploc/torch/dtype.h"

namespace maploc::torch {

/// What kind of object a Tensor entry stands for.
enum class TensorKind : std::uint8_t {
  kDense,           ///< a strided tensor over a storage (also Parameters and subclasses)
  kStorage,         ///< a bare storage object in the tree, listed as a 1-D view of it
  kQuantized,       ///< _rebuild_qtensor: a strided tensor of q-dtype plus quantizer parameters
  kSparseCoo,       ///< _rebuild_sparse_tensor, layout torch.sparse_coo (components: indices, values)
  kSparseCsr,       ///< layout torch.sparse_csr (components: crow_indices, col_indices, values)
  kSparseCsc,       ///< layout torch.sparse_csc (ccol_indices, row_indices, values)
  kSparseBsr,       ///< layout torch.sparse_bsr (crow_indices, col_indices, values)
  kSparseBsc,       ///< layout torch.sparse_bsc (ccol_indices, row_indices, values)
  kNested,          ///< _rebuild_nested_tensor (components: buffer, sizes, strides, storage_offsets)
  kMeta,            ///< _rebuild_meta_tensor_no_storage: shape only, no bytes
  kWrapperSubclass, ///< _rebuild_wrapper_subclass: shape and device only, no bytes
  kDeviceFromCpu,   ///< _rebuild_device_tensor_from_cpu_tensor / _from_numpy (component: data)
  kNestedJagged,    ///< _rebuild_njt, layout torch.jagged (components: values, offsets[, lengths]; no shape:
                    ///< its ragged dimension has no size; attributes ragged_idx, min_seqlen, max_seqlen)
};

/// Lower-case name used in listings and JSON: "dense", "storage", "quantized",
/// "sparse_coo", ..., "nested", "meta", "wrapper_subclass", "device_from_cpu", "nested_jagged".
std::string_view tensor_kind_name(TensorKind kind) noexcept;

/// A part of a composite tensor: its role and the index of the part in Checkpoint::tensors().
struct Component {
  std::string role;   ///< "indices", "values", "crow_indices", "scales", "buffer", "data", ...
  std::size_t tensor; ///< index into Checkpoint::tensors()
};

/// Quantizer parameters of a kQuantized tensor (_rebuild_qtensor's 5th argument).
struct Quantizer {
  std::string qscheme;          ///< "per_tensor_affine", "per_channel_affine", ...
  double scale = 0;             ///< per-tensor schemes
  std::int64_t zero_point = 0;  ///< per-tensor schemes
  std::int64_t axis = -1;       ///< per-channel schemes; scales/zero points are components
};

/// One plain value of a tensor's state (its `__dict__` or slots, the last argument of
/// `_rebuild_from_type_v2` and `_rebuild_parameter_with_state`) that holds no tensor: a wrapper
/// subclass's `block_size`, `target_dtype`, an enum member. Tensors in the state are tensors of
/// their own, named `<tensor name>.<attribute>` (docs/torch.md, "Tensor state"). Nothing of it is
/// executed: `json` renders the pickled value inertly (docs/torch.md gives the rendering).
struct TensorAttribute {
  std::string name;  ///< the attribute's name, as str() prints the key ("block_size")
  std::string json;  ///< its value as compact JSON text ("[1,64]", "null", {"dtype":"int4"}, ...)
};

/// One tensor. Offsets and strides are in elements of dtype, as torch keeps them.
/// Every tensor with a storage has been checked to lie inside it.
struct Tensor {
  std::string name;                 ///< keys, indices and attributes joined with '.'
  DType dtype = DType::kFloat32;
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> stride;
  std::int64_t storage_offset = 0;
  std::optional<std::size_t> storage; ///< index into Checkpoint::storages(); none for storage-less kinds and composites
  bool requires_grad = false;
  TensorKind kind = TensorKind::kDense;
  bool parameter = false;           ///< rebuilt through _rebuild_parameter*
  bool conj = false;                ///< metadata {'conj': True}: values are the conjugate of the stored ones
  bool neg = false;                 ///< metadata {'neg': True}: values are the negation of the stored ones
  std::string subclass;             ///< "module.Name" of a tensor subclass (_rebuild_from_type_v2), else empty
  std::string device;               ///< for storage-less kinds: the device argument ("cuda:0", "meta")
  std::optional<Quantizer> quantizer; ///< kQuantized only
  std::vector<Component> components;  ///< parts of composites (sparse, nested, per-channel quantized, ...)
  bool is_component = false;        ///< this tensor is a part of another one
  /// The tensor whose state (`__dict__` or slots) holds this one, named `<that name>.<attribute>`:
  /// a wrapper subclass's inner tensor, a tensor attribute. Writers that re-emit the holder
  /// (Checkpoint::tensor_node) carry this tensor inside it.
  std::optional<std::size_t> held_by;
  std::vector<TensorAttribute> attributes; ///< tensor-free values of its state, in file order

  /// Product of shape (0 for an empty tensor, 1 for a 0-d one).
  std::uint64_t numel() const noexcept;
};

}  // namespace maploc::torch
