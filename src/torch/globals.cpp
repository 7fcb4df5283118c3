// globals.cpp - the one table of globals: torch's allowlists and the interpreter's dispatch (§4.6, §6.2).
#include "globals.h"

#include <algorithm>
#include <unordered_map>

#include "maploc/torch/dtype.h"

namespace maploc::torch {
namespace {

constexpr std::uint8_t W = kWeightsOnly;
constexpr std::uint8_t D = kDcp;
using U = GlobalUse;
using R = RebuildForm;

constexpr GlobalEntry rebuild(std::string_view module, std::string_view name, RebuildForm form, int lo, int hi,
                              std::uint8_t allowed) {
  return {module, name, U::kRebuild, form, static_cast<std::uint8_t>(lo), static_cast<std::uint8_t>(hi), allowed};
}
constexpr GlobalEntry row(std::string_view module, std::string_view name, GlobalUse use, std::uint8_t allowed = 0) {
  return {module, name, use, R::kNone, 0, 0, allowed};
}

// Allowed (W): torch/_weights_only_unpickler.py::_get_allowed_globals, its fixed entries and its
// families (every dtype, the storage classes of torch._storage_classes, the tensor classes of
// torch._tensor_classes). Allowed (D): the classes torch.distributed.checkpoint's metadata pickles.
constexpr GlobalEntry kTable[] = {
    // The rebuild functions: each tensor form a checkpoint holds, with the arity torch's takes.
    rebuild("torch._utils", "_rebuild_tensor", R::kTensor, 4, 4, W),
    rebuild("torch._utils", "_rebuild_tensor_v2", R::kTensorV2, 6, 7, W),
    rebuild("torch._utils", "_rebuild_tensor_v3", R::kTensorV3, 7, 8, W),
    rebuild("torch._utils", "_rebuild_parameter", R::kParameter, 3, 4, W),
    rebuild("torch._utils", "_rebuild_parameter_with_state", R::kParameter, 3, 4, W),
    rebuild("torch._utils", "_rebuild_qtensor", R::kQuantized, 7, 7, W),
    rebuild("torch._utils", "_rebuild_sparse_tensor", R::kSparse, 2, 2, W),
    rebuild("torch._utils", "_rebuild_sparse_csr_tensor", R::kSparse, 2, 2, 0),
    rebuild("torch._utils", "_rebuild_nested_tensor", R::kNested, 4, 4, 0),
    rebuild("torch._utils", "_rebuild_meta_tensor_no_storage", R::kMeta, 4, 4, W),
    rebuild("torch._utils", "_rebuild_wrapper_subclass", R::kWrapperSubclass, 8, 8, W),
    rebuild("torch._utils", "_rebuild_device_tensor_from_cpu_tensor", R::kDeviceFromCpu, 4, 4, W),
    rebuild("torch._utils", "_rebuild_device_tensor_from_numpy", R::kDeviceFromNumpy, 4, 4, W),
    rebuild("torch._utils", "_rebuild_xla_tensor", R::kDeviceFromNumpy, 4, 4, 0),
    rebuild("torch._tensor", "_rebuild_from_type_v2", R::kFromType, 3, 4, W),
    rebuild("torch._tensor", "_rebuild_from_type", R::kFromType, 3, 4, 0),
    // torch.tensor: torch._tensor's name before PR #51633 (torch's load_module_mapping renames it).
    rebuild("torch.tensor", "_rebuild_from_type_v2", R::kFromType, 3, 4, 0),
    rebuild("torch.tensor", "_rebuild_from_type", R::kFromType, 3, 4, 0),

    // Containers: Counter(dict), set(list), OrderedDict() + SETITEMS, defaultdict(factory) + SETITEMS.
    row("collections", "OrderedDict", U::kContainer, W),
    row("collections", "Counter", U::kContainer, W),
    row("collections", "defaultdict", U::kContainer),
    row("builtins", "set", U::kContainer, W),
    row("builtins", "frozenset", U::kContainer),
    row("builtins", "list", U::kContainer),
    row("builtins", "dict", U::kContainer),
    row("builtins", "tuple", U::kContainer),

    // Values and calls whose result holds no tensor.
    row("builtins", "bytearray", U::kLeaf, W),
    row("builtins", "complex", U::kLeaf, W),
    row("builtins", "*", U::kLeaf),
    row("_codecs", "encode", U::kLeaf, W),
    row("_codecs", "*", U::kLeaf),
    row("torch", "Size", U::kLeaf, W | D),
    row("torch", "device", U::kLeaf, W),
    row("torch", "<dtype>", U::kLeaf, W | D),
    row("torch", "per_tensor_affine", U::kLeaf, W),
    row("torch", "per_tensor_symmetric", U::kLeaf, W),
    row("torch", "per_channel_affine", U::kLeaf, W),
    row("torch", "per_channel_symmetric", U::kLeaf, W),
    row("torch", "per_channel_affine_float_qparams", U::kLeaf, W),
    row("torch", "*", U::kLeaf),
    row("torch.serialization", "_get_layout", U::kLeaf, W | D),
    row("torch.serialization", "*", U::kLeaf),
    row("numpy", "*", U::kLeaf),
    row("numpy.", "*", U::kLeaf),  // every submodule: numpy.core.multiarray, numpy._core.multiarray, ...
    row("pathlib", "*", U::kLeaf),

    // Storage classes (torch._storage_classes): values, named by a storage's persistent id.
    row("torch", "DoubleStorage", U::kLeaf, W), row("torch", "FloatStorage", U::kLeaf, W),
    row("torch", "HalfStorage", U::kLeaf, W), row("torch", "BFloat16Storage", U::kLeaf, W),
    row("torch", "LongStorage", U::kLeaf, W), row("torch", "IntStorage", U::kLeaf, W),
    row("torch", "ShortStorage", U::kLeaf, W), row("torch", "CharStorage", U::kLeaf, W),
    row("torch", "ByteStorage", U::kLeaf, W), row("torch", "BoolStorage", U::kLeaf, W),
    row("torch", "ComplexDoubleStorage", U::kLeaf, W), row("torch", "ComplexFloatStorage", U::kLeaf, W),
    row("torch", "QInt8Storage", U::kLeaf, W), row("torch", "QUInt8Storage", U::kLeaf, W),
    row("torch", "QInt32Storage", U::kLeaf, W), row("torch", "QUInt4x2Storage", U::kLeaf, W),
    row("torch", "QUInt2x4Storage", U::kLeaf, W),
    row("torch.storage", "TypedStorage", U::kNone, W),
    row("torch.storage", "UntypedStorage", U::kNone, W),
    row("torch.nn.parameter", "Parameter", U::kNone, W),

    // Tensor classes (torch._tensor_classes, and torch.Tensor): the oldest tensor form.
    row("torch", "Tensor", U::kTensorClass, W),
#define MAPLOC_TENSOR_CLASS(name, sparse_allowed)                                             \
  row("torch", name, U::kTensorClass, W), row("torch.cuda", name, U::kTensorClass, W), \
      row("torch.sparse", name, U::kTensorClass, (sparse_allowed) ? W : 0)
    MAPLOC_TENSOR_CLASS("DoubleTensor", true), MAPLOC_TENSOR_CLASS("FloatTensor", true),
    MAPLOC_TENSOR_CLASS("HalfTensor", false), MAPLOC_TENSOR_CLASS("BFloat16Tensor", false),
    MAPLOC_TENSOR_CLASS("LongTensor", true), MAPLOC_TENSOR_CLASS("IntTensor", true),
    MAPLOC_TENSOR_CLASS("ShortTensor", true), MAPLOC_TENSOR_CLASS("CharTensor", true),
    MAPLOC_TENSOR_CLASS("ByteTensor", true), MAPLOC_TENSOR_CLASS("BoolTensor", false),
    MAPLOC_TENSOR_CLASS("ComplexDoubleTensor", false), MAPLOC_TENSOR_CLASS("ComplexFloatTensor", false),
#undef MAPLOC_TENSOR_CLASS

    // TorchScript's helpers that return (a typed view of) their first argument (§3.3).
    row("torch.jit._pickle", "restore_type_tag", U::kPassthrough),
    row("torch.jit._pickle", "build_tensorlist", U::kPassthrough),
    row("torch.jit._pickle", "build_intlist", U::kPassthrough),
    row("torch.jit._pickle", "build_doublelist", U::kPassthrough),
    row("torch.jit._pickle", "build_boollist", U::kPassthrough),
    row("torch.jit._pickle", "build_list", U::kPassthrough),

    // torch.distributed.checkpoint's .metadata (sharded-and-distributed.md).
    row("torch.distributed.checkpoint.metadata", "Metadata", U::kDcpMetadata, D),
    row("torch.distributed.checkpoint.metadata", "MetadataIndex", U::kDcpMetadata, D),
    row("torch.distributed.checkpoint.metadata", "TensorStorageMetadata", U::kDcpMetadata, D),
    row("torch.distributed.checkpoint.metadata", "ChunkStorageMetadata", U::kDcpMetadata, D),
    row("torch.distributed.checkpoint.metadata", "TensorProperties", U::kDcpMetadata, D),
    row("torch.distributed.checkpoint.metadata", "BytesStorageMetadata", U::kDcpMetadata, D),
    row("torch.distributed.checkpoint.metadata", "_MEM_FORMAT_ENCODING", U::kDcpMetadata, D),
    row("torch.distributed.checkpoint.metadata", "StorageMeta", U::kDcpMetadata, D),
    row("torch.distributed.checkpoint.filesystem", "_StorageInfo", U::kDcpMetadata, D),
};

constexpr GlobalEntry kUnknown{};

// Rows by name, then module. The keys are the table's own constants, so no input can lengthen
// a bucket: a lookup compares at most the few rows that share a name.
struct Index {
  std::unordered_multimap<std::string_view, const GlobalEntry*> by_name;
  Index() {
    by_name.reserve(std::size(kTable));
    for (const auto& e : kTable) by_name.emplace(e.name, &e);
  }
  const GlobalEntry* find(std::string_view module, std::string_view name) const {
    const auto [lo, hi] = by_name.equal_range(name);
    for (auto it = lo; it != hi; ++it) {
      if (it->second->module == module) return it->second;
    }
    return nullptr;
  }
};

const Index& index() {
  static const Index kIndex;
  return kIndex;
}

}  // namespace

const GlobalEntry& global_entry(std::string_view module, std::string_view name) noexcept {
  const Index& ix = index();
  if (name != "*" && name != "<dtype>") {
    if (const GlobalEntry* e = ix.find(module, name)) return *e;
  }
  if (module == "torch" && dtype_from_name(name)) return *ix.find("torch", "<dtype>");  // uint1..7, int1..7 too
  if (const GlobalEntry* e = ix.find(module, "*")) return *e;
  if (module.substr(0, 6) == "numpy.") return *ix.find("numpy.", "*");
  return kUnknown;
}

const GlobalEntry& global_entry(const pickle::Value& v) noexcept {
  if (!v.is(pickle::Kind::kGlobal)) return kUnknown;
  return global_entry(v.global_module(), v.global_name());
}

std::vector<std::string> globals_not_allowed(const pickle::Result& result, AllowedIn list) {
  std::vector<std::string> out;
  for (const auto& g : result.globals()) {
    if (!g.is(pickle::Kind::kGlobal) || (global_entry(g).allowed & list) != 0) continue;
    std::string path(g.global_module());
    path += '.';
    path += g.global_name();
    out.push_back(std::move(path));
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace maploc::torch
