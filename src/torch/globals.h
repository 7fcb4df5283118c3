// globals.h - the one table of the Python globals a checkpoint names: what torch's allowlists say
// of each, and what the interpreter does with a call of it (internal).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "maploc/pickle/machine.h"
#include "maploc/pickle/value.h"

namespace maploc::torch {

/// What the interpreter does with a call (REDUCE, NEWOBJ) of the global.
enum class GlobalUse : std::uint8_t {
  kNone,          ///< not in the table: an inert object, its BUILD state walked as attributes
  kRebuild,       ///< a rebuild function: GlobalEntry::rebuild says which tensor form
  kTensorClass,   ///< a legacy tensor class: torch.FloatTensor() then BUILD with set_'s arguments
  kContainer,     ///< the call's argument, SETITEMS or APPENDS hold the items (OrderedDict, set(list))
  kPassthrough,   ///< a TorchScript helper returning (a typed view of) its first argument
  kLeaf,          ///< its result holds no tensor (torch.Size, torch.device, numpy arrays, paths)
  kDcpMetadata,   ///< a class of torch.distributed.checkpoint's .metadata (dcp_format.cpp reads it)
};

/// Which rebuild function (torch/_utils.py, torch/_tensor.py; pytorch-format.md §4.6).
enum class RebuildForm : std::uint8_t {
  kNone,
  kTensor,           ///< _rebuild_tensor(storage, offset, size, stride)
  kTensorV2,         ///< _rebuild_tensor_v2(..., requires_grad, hooks[, metadata])
  kTensorV3,         ///< _rebuild_tensor_v3(..., requires_grad, hooks, dtype[, metadata])
  kParameter,        ///< _rebuild_parameter(data, requires_grad, hooks[, state])
  kFromType,         ///< _rebuild_from_type(_v2)(func, type, args[, dict])
  kQuantized,        ///< _rebuild_qtensor
  kSparse,           ///< _rebuild_sparse_tensor, _rebuild_sparse_csr_tensor
  kNested,           ///< _rebuild_nested_tensor
  kMeta,             ///< _rebuild_meta_tensor_no_storage
  kWrapperSubclass,  ///< _rebuild_wrapper_subclass
  kDeviceFromCpu,    ///< _rebuild_device_tensor_from_cpu_tensor
  kDeviceFromNumpy,  ///< _rebuild_device_tensor_from_numpy, _rebuild_xla_tensor
  kNestedJagged,     ///< torch.nested._internal.nested_tensor._rebuild_njt(constructor_kwargs)
};

/// The allowlists a global is on.
enum AllowedIn : std::uint8_t {
  kAllowedNowhere = 0,
  kWeightsOnly = 1,  ///< torch's default weights_only allowlist (_get_allowed_globals)
  kDcp = 2,          ///< what torch.distributed.checkpoint's metadata may name
};

/// One row of the table.
struct GlobalEntry {
  std::string_view module;
  std::string_view name;      ///< or "*": any name of the module; "<dtype>": any dtype name
  GlobalUse use = GlobalUse::kNone;
  RebuildForm rebuild = RebuildForm::kNone;
  std::uint8_t min_args = 0;  ///< kRebuild: the arity torch's function takes
  std::uint8_t max_args = 0;
  std::uint8_t allowed = kAllowedNowhere;  ///< AllowedIn bits
};

/// Every row, in the table's order.
std::span<const GlobalEntry> global_table() noexcept;

/// The row of a global (module after fix_imports, as pickle::Value gives it); a row with
/// use kNone and nothing allowed when the table does not name it. Linear in the name's length.
const GlobalEntry& global_entry(std::string_view module, std::string_view name) noexcept;
/// The row of a kGlobal value; the empty row for any other kind.
const GlobalEntry& global_entry(const pickle::Value& v) noexcept;

/// "module.name" of every global of the stream that is not on `list`, sorted, once each.
std::vector<std::string> globals_not_allowed(const pickle::Result& result, AllowedIn list);

}  // namespace maploc::torch
