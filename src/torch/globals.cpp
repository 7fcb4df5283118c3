// globals.cpp - the one table of globals: torch's allowlists and the interpreter's dispatch (§4.6, §6.2).
#include "globals.h"

#include <algorithm>
#include <unordered_map>

#include "maploc/torch/dtype.h"

namespace maploc::torch {
namespace {

using Use = GlobalUse;
using Form = RebuildForm;
constexpr std::uint8_t kBoth = kWeightsOnly | kDcp;

constexpr GlobalEntry rebuild(std::string_view module, std::string_view name, RebuildForm form, int lo, int hi,
                              std::uint8_t allowed) {
  return {module, name, Use::kRebuild, form, static_cast<std::uint8_t>(lo), static_cast<std::uint8_t>(hi), allowed};
}
constexpr GlobalEntry row(std::string_view module, std::string_view name, GlobalUse use, std::uint8_t allowed = 0) {
  return {module, name, use, Form::kNone, 0, 0, allowed};
}

// kWeightsOnly: torch/_weights_only_unpickler.py::_get_allowed_globals, its fixed entries and its
// families (every dtype, the storage classes of torch._storage_classes, the tensor classes of
// torch._tensor_classes). kDcp: the classes torch.distributed.checkpoint's metadata pickles.
constexpr GlobalEntry kTable[] = {
    // The rebuild functions: each tensor form a checkpoint holds, with the arity torch's takes.
    rebuild("torch._utils", "_rebuild_tensor", Form::kTensor, 4, 4, kWeightsOnly),
    rebuild("torch._utils", "_rebuild_tensor_v2", Form::kTensorV2, 6, 7, kWeightsOnly),
    rebuild("torch._utils", "_rebuild_tensor_v3", Form::kTensorV3, 7, 8, kWeightsOnly),
    rebuild("torch._utils", "_rebuild_parameter", Form::kParameter, 3, 4, kWeightsOnly),
    rebuild("torch._utils", "_rebuild_parameter_with_state", Form::kParameter, 3, 4, kWeightsOnly),
    rebuild("torch._utils", "_rebuild_qtensor", Form::kQuantized, 7, 7, kWeightsOnly),
    rebuild("torch._utils", "_rebuild_sparse_tensor", Form::kSparse, 2, 2, kWeightsOnly),
    rebuild("torch._utils", "_rebuild_sparse_csr_tensor", Form::kSparse, 2, 2, 0),
    rebuild("torch._utils", "_rebuild_nested_tensor", Form::kNested, 4, 4, 0),
    rebuild("torch._utils", "_rebuild_meta_tensor_no_storage", Form::kMeta, 4, 4, kWeightsOnly),
    rebuild("torch._utils", "_rebuild_wrapper_subclass", Form::kWrapperSubclass, 8, 8, kWeightsOnly),
    rebuild("torch._utils", "_rebuild_device_tensor_from_cpu_tensor", Form::kDeviceFromCpu, 4, 4, kWeightsOnly),
    rebuild("torch._utils", "_rebuild_device_tensor_from_numpy", Form::kDeviceFromNumpy, 4, 4, kWeightsOnly),
    rebuild("torch._utils", "_rebuild_xla_tensor", Form::kDeviceFromNumpy, 4, 4, 0),
    rebuild("torch._tensor", "_rebuild_from_type_v2", Form::kFromType, 3, 4, kWeightsOnly),
    rebuild("torch.nested._internal.nested_tensor", "_rebuild_njt", Form::kNestedJagged, 1, 1, 0),
    rebuild("torch._tensor", "_rebuild_from_type", Form::kFromType, 3, 4, 0),
    // torch.tensor: torch._tensor's name before PR #51633 (torch's load_module_mapping renames it).
    rebuild("torch.tensor", "_rebuild_from_type_v2", Form::kFromType, 3, 4, 0),
    rebuild("torch.tensor", "_rebuild_from_type", Form::kFromType, 3, 4, 0),

    // Containers: Counter(dict), set(list), OrderedDict() + SETITEMS, defaultdict(factory) + SETITEMS.
    row("collections", "OrderedDict", Use::kContainer, kWeightsOnly),
    row("collections", "Counter", Use::kContainer, kWeightsOnly),
    row("collections", "defaultdict", Use::kContainer),
    row("builtins", "set", Use::kContainer, kWeightsOnly),
    row("builtins", "frozenset", Use::kContainer),
    row("builtins", "list", Use::kContainer),
    row("builtins", "dict", Use::kContainer),
    row("builtins", "tuple", Use::kContainer),

    // Values and calls whose result holds no tensor.
    row("builtins", "bytearray", Use::kLeaf, kWeightsOnly),
    row("builtins", "complex", Use::kLeaf, kWeightsOnly),
    row("builtins", "*", Use::kLeaf),
    row("_codecs", "encode", Use::kLeaf, kWeightsOnly),
    row("_codecs", "*", Use::kLeaf),
    row("torch", "Size", Use::kLeaf, kBoth),
    row("torch", "device", Use::kLeaf, kWeightsOnly),
    row("torch", "<dtype>", Use::kLeaf, kBoth),
    row("torch", "bcomplex32", Use::kLeaf, kWeightsOnly),  // torch 2.15's; no DType of maploc's holds it yet
    row("torch", "per_tensor_affine", Use::kLeaf, kWeightsOnly),
    row("torch", "per_tensor_symmetric", Use::kLeaf, kWeightsOnly),
    row("torch", "per_channel_affine", Use::kLeaf, kWeightsOnly),
    row("torch", "per_channel_symmetric", Use::kLeaf, kWeightsOnly),
    row("torch", "per_channel_affine_float_qparams", Use::kLeaf, kWeightsOnly),
    row("torch", "*", Use::kLeaf),
    row("torch.serialization", "_get_layout", Use::kLeaf, kBoth),
    row("torch.serialization", "*", Use::kLeaf),
    row("numpy", "*", Use::kLeaf),
    row("numpy.", "*", Use::kLeaf),  // every submodule: numpy.core.multiarray, numpy._core.multiarray, ...
    row("pathlib", "*", Use::kLeaf),

    // Storage classes (torch._storage_classes, the CUDA ones too): values, named by persistent ids.
    row("torch", "QInt8Storage", Use::kLeaf, kWeightsOnly), row("torch", "QUInt8Storage", Use::kLeaf, kWeightsOnly),
    row("torch", "QInt32Storage", Use::kLeaf, kWeightsOnly), row("torch", "QUInt4x2Storage", Use::kLeaf, kWeightsOnly),
    row("torch", "QUInt2x4Storage", Use::kLeaf, kWeightsOnly),
#define MAPLOC_STORAGE_CLASS(name) \
  row("torch", name, Use::kLeaf, kWeightsOnly), row("torch.cuda", name, Use::kLeaf, kWeightsOnly)
    MAPLOC_STORAGE_CLASS("DoubleStorage"), MAPLOC_STORAGE_CLASS("FloatStorage"),
    MAPLOC_STORAGE_CLASS("HalfStorage"), MAPLOC_STORAGE_CLASS("BFloat16Storage"),
    MAPLOC_STORAGE_CLASS("LongStorage"), MAPLOC_STORAGE_CLASS("IntStorage"),
    MAPLOC_STORAGE_CLASS("ShortStorage"), MAPLOC_STORAGE_CLASS("CharStorage"),
    MAPLOC_STORAGE_CLASS("ByteStorage"), MAPLOC_STORAGE_CLASS("BoolStorage"),
    MAPLOC_STORAGE_CLASS("ComplexDoubleStorage"), MAPLOC_STORAGE_CLASS("ComplexFloatStorage"),
#undef MAPLOC_STORAGE_CLASS
    row("torch.storage", "TypedStorage", Use::kNone, kWeightsOnly),
    row("torch.storage", "UntypedStorage", Use::kNone, kWeightsOnly),
    row("torch.nn.parameter", "Parameter", Use::kNone, kWeightsOnly),

    // Tensor classes (torch._tensor_classes, and torch.Tensor): the oldest tensor form. torch allows
    // the dense ones but the complex, the sparse ones but the complex and bool.
    row("torch", "Tensor", Use::kTensorClass, kWeightsOnly),
#define MAPLOC_TENSOR_CLASS(name, dense, sparse)                                                          \
  row("torch", name, Use::kTensorClass, (dense) ? kWeightsOnly : 0),                                     \
      row("torch.cuda", name, Use::kTensorClass, (dense) ? kWeightsOnly : 0),                            \
      row("torch.sparse", name, Use::kTensorClass, (sparse) ? kWeightsOnly : 0),                         \
      row("torch.cuda.sparse", name, Use::kTensorClass, (sparse) ? kWeightsOnly : 0)
    MAPLOC_TENSOR_CLASS("DoubleTensor", true, true), MAPLOC_TENSOR_CLASS("FloatTensor", true, true),
    MAPLOC_TENSOR_CLASS("HalfTensor", true, true), MAPLOC_TENSOR_CLASS("BFloat16Tensor", true, true),
    MAPLOC_TENSOR_CLASS("LongTensor", true, true), MAPLOC_TENSOR_CLASS("IntTensor", true, true),
    MAPLOC_TENSOR_CLASS("ShortTensor", true, true), MAPLOC_TENSOR_CLASS("CharTensor", true, true),
    MAPLOC_TENSOR_CLASS("ByteTensor", true, true), MAPLOC_TENSOR_CLASS("BoolTensor", true, false),
    MAPLOC_TENSOR_CLASS("ComplexDoubleTensor", false, false), MAPLOC_TENSOR_CLASS("ComplexFloatTensor", false, false),
#undef MAPLOC_TENSOR_CLASS

    // TorchScript's helpers that return (a typed view of) their first argument (§3.3).
    row("torch.jit._pickle", "restore_type_tag", Use::kPassthrough),
    row("torch.jit._pickle", "build_tensorlist", Use::kPassthrough),
    row("torch.jit._pickle", "build_intlist", Use::kPassthrough),
    row("torch.jit._pickle", "build_doublelist", Use::kPassthrough),
    row("torch.jit._pickle", "build_boollist", Use::kPassthrough),
    row("torch.jit._pickle", "build_list", Use::kPassthrough),

    // torch.distributed.checkpoint's .metadata (sharded-and-distributed.md).
    row("torch.distributed.checkpoint.metadata", "Metadata", Use::kDcpMetadata, kDcp),
    row("torch.distributed.checkpoint.metadata", "MetadataIndex", Use::kDcpMetadata, kDcp),
    row("torch.distributed.checkpoint.metadata", "TensorStorageMetadata", Use::kDcpMetadata, kDcp),
    row("torch.distributed.checkpoint.metadata", "ChunkStorageMetadata", Use::kDcpMetadata, kDcp),
    row("torch.distributed.checkpoint.metadata", "TensorProperties", Use::kDcpMetadata, kDcp),
    row("torch.distributed.checkpoint.metadata", "BytesStorageMetadata", Use::kDcpMetadata, kDcp),
    row("torch.distributed.checkpoint.metadata", "_MEM_FORMAT_ENCODING", Use::kDcpMetadata, kDcp),
    row("torch.distributed.checkpoint.metadata", "StorageMeta", Use::kDcpMetadata, kDcp),
    row("torch.distributed.checkpoint.filesystem", "_StorageInfo", Use::kDcpMetadata, kDcp),
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

std::span<const GlobalEntry> global_table() noexcept { return kTable; }

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
