// allowlist.cpp - torch's default weights_only allowlist, to list the globals a checkpoint needs beyond it (§6.2).
#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "state.h"
#include "storage_table.h"

namespace maploc::torch {
namespace {

// torch/_weights_only_unpickler.py::_get_allowed_globals, the fixed entries.
constexpr std::string_view kAllowed[] = {
    "collections.OrderedDict",
    "collections.Counter",
    "torch.nn.parameter.Parameter",
    "torch.serialization._get_layout",
    "torch.Size",
    "torch.Tensor",
    "torch.device",
    "_codecs.encode",
    "builtins.bytearray",
    "builtins.set",
    "builtins.complex",
    "torch.storage.TypedStorage",
    "torch.storage.UntypedStorage",
    "torch.per_tensor_affine",
    "torch.per_tensor_symmetric",
    "torch.per_channel_affine",
    "torch.per_channel_symmetric",
    "torch.per_channel_affine_float_qparams",
    "torch._utils._rebuild_parameter",
    "torch._utils._rebuild_parameter_with_state",
    "torch._utils._rebuild_qtensor",
    "torch._utils._rebuild_tensor",
    "torch._utils._rebuild_tensor_v2",
    "torch._utils._rebuild_tensor_v3",
    "torch._utils._rebuild_sparse_tensor",
    "torch._utils._rebuild_meta_tensor_no_storage",
    "torch._utils._rebuild_wrapper_subclass",
    "torch._utils._rebuild_device_tensor_from_numpy",
    "torch._utils._rebuild_device_tensor_from_cpu_tensor",
    "torch._tensor._rebuild_from_type_v2",
};

// The Python storage classes of torch._storage_classes (§4.4): C++-only
// names such as torch.Float8_e5m2Storage are not among them.
constexpr std::string_view kStorageClasses[] = {
    "DoubleStorage", "FloatStorage", "HalfStorage", "BFloat16Storage", "LongStorage", "IntStorage",
    "ShortStorage", "CharStorage", "ByteStorage", "BoolStorage", "ComplexDoubleStorage", "ComplexFloatStorage",
    "QInt8Storage", "QUInt8Storage", "QInt32Storage", "QUInt4x2Storage", "QUInt2x4Storage",
};

// torch._tensor_classes, without their module (torch, torch.cuda, torch.sparse).
constexpr std::string_view kTensorClasses[] = {
    "DoubleTensor", "FloatTensor", "HalfTensor", "BFloat16Tensor", "LongTensor", "IntTensor", "ShortTensor",
    "CharTensor", "ByteTensor", "BoolTensor", "ComplexDoubleTensor", "ComplexFloatTensor",
};

template <std::size_t N>
bool contains(const std::string_view (&table)[N], std::string_view s) {
  return std::find(std::begin(table), std::end(table), s) != std::end(table);
}

bool allowed(std::string_view module, std::string_view name) {
  std::string path(module);
  path += '.';
  path += name;
  if (contains(kAllowed, path)) return true;
  if (module == "torch") {
    if (dtype_from_name(name)) return true;  // every dtype (§6.2), uint1..7 and int1..7 included
    if (contains(kStorageClasses, name)) return true;
  }
  if ((module == "torch" || module == "torch.cuda") && contains(kTensorClasses, name)) return true;
  if (module == "torch.sparse" && contains(kTensorClasses, name) && name != "BoolTensor" && name != "HalfTensor" &&
      name != "BFloat16Tensor" && name != "ComplexDoubleTensor" && name != "ComplexFloatTensor") {
    return true;
  }
  return false;
}

}  // namespace

std::vector<std::string> unknown_globals_of(const pickle::Result& result) {
  std::vector<std::string> out;
  for (const auto& g : result.globals()) {
    if (!g.is(pickle::Kind::kGlobal) || allowed(g.global_module(), g.global_name())) continue;
    out.push_back(global_path(g));
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace maploc::torch
