// object.cpp - the C API's object tree: a checkpoint's main object serialised in one buffer (the tagged
// format of maploc_c.h, "the object tree"), checkpoints opened from memory, storages by DLPack, code names.
#include <cstdlib>
#include <cstring>
#include <memory>
#include <unordered_map>

#include "handles.h"

using namespace maploc;
using capi::guarded;
using pickle::Kind;
using pickle::Value;

namespace {

constexpr std::uint8_t kNew = 0x80;  // the value takes the next back-reference id

// Writes the tree depth-first. Every boxed node is written once; a later reference to it is 'R' and
// its id (ids in order of first writing), so the size is linear in the tree's nodes and a cycle ends
// at its first back-reference.
class Writer {
 public:
  explicit Writer(const torch::Checkpoint& c) : c_(c) {
    for (const auto& o : c.object_tensors()) {
      if (o.node != nullptr) {
        nodes_.emplace(o.node, o.tensor);  // emplace keeps the first path's tensor
      } else {
        handles_.emplace(o.handle, o.tensor);
      }
    }
    ids_.reserve(c.object_tensors().size() * 2 + 16);
  }

  std::vector<std::uint8_t> run() {
    const Value& root = c_.root();
    const auto format = c_.format();
    if (root.is_none() && (format == torch::Format::kSafetensors || format == torch::Format::kSet ||
                           format == torch::Format::kDcp)) {
      flat();
    } else {
      value(root, 0);
    }
    return std::move(out_);
  }

 private:
  // Formats without an object tree: {name: tensor} in file order, components inside their composite.
  void flat() {
    const auto& tensors = c_.tensors();
    std::uint32_t n = 0;
    for (const auto& t : tensors) n += t.is_component ? 0 : 1;
    byte('d' | kNew);
    u32(n);
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      if (tensors[i].is_component) continue;
      byte('s');
      str(tensors[i].name);
      byte('X');
      u32(static_cast<std::uint32_t>(i));
    }
  }

  void value(const Value& v, std::size_t depth) {
    if (depth > c_.limits().pickle_max_nesting_depth + 64) {
      throw Error(ErrorCode::kPickleLimitNesting, Stage::kTorch,
                  "the object tree is nested deeper than Limits::pickle_max_nesting_depth");
    }
    switch (v.kind()) {
      case Kind::kNone: byte('N'); return;
      case Kind::kBool: byte(v.as_bool() ? 'T' : 'F'); return;
      case Kind::kFloat: {
        byte('f');
        const double d = v.as_float();
        raw(&d, 8);
        return;
      }
      case Kind::kExternal: {
        const auto found = handles_.find(v.external_handle());
        if (found != handles_.end()) {
          byte('X');
          u32(static_cast<std::uint32_t>(found->second));
        } else {
          byte('N');  // a storage no walk reached (never for torch-written files: completeness)
        }
        return;
      }
      default: break;
    }
    const void* node = v.identity();
    if (node != nullptr) {
      const auto [it, fresh] = ids_.emplace(node, next_id_);
      if (!fresh) {
        byte('R');
        u32(it->second);
        return;
      }
      ++next_id_;
    }
    const std::uint8_t mark = node != nullptr ? kNew : 0;
    switch (v.kind()) {
      case Kind::kInt:
        if (v.is_big_int()) {
          const auto b = v.int_bytes();
          byte('I' | mark);
          u32(static_cast<std::uint32_t>(b.size()));
          raw(b.data(), b.size());
        } else {
          byte('i' | mark);
          const std::int64_t i = v.as_int();
          raw(&i, 8);
        }
        return;
      case Kind::kStr:
        byte('s' | mark);
        str(v.as_str());
        return;
      case Kind::kBytes:
      case Kind::kByteArray: {
        const auto b = v.as_bytes();
        byte((v.is(Kind::kBytes) ? 'b' : 'a') | mark);
        u32(static_cast<std::uint32_t>(b.size()));
        raw(b.data(), b.size());
        return;
      }
      case Kind::kTuple:
      case Kind::kList:
      case Kind::kSet:
      case Kind::kFrozenSet: {
        const char tag = v.is(Kind::kTuple) ? 't' : v.is(Kind::kList) ? 'l' : v.is(Kind::kSet) ? 'S' : 'Z';
        byte(tag | mark);
        const auto e = v.elements();
        u32(static_cast<std::uint32_t>(e.size()));
        for (const auto& x : e) value(x, depth + 1);
        return;
      }
      case Kind::kDict:
        byte('d' | mark);
        items(v.items(), depth);
        return;
      case Kind::kGlobal:
        byte('G' | mark);
        str(v.global_module());
        str(v.global_name());
        return;
      case Kind::kReduce:
      case Kind::kObject: {
        if (const auto t = nodes_.find(node); t != nodes_.end()) {
          byte('X' | mark);
          u32(static_cast<std::uint32_t>(t->second));
          return;
        }
        byte('C' | mark);
        byte(static_cast<std::uint8_t>(v.call_op()));
        value(v.callable(), depth + 1);
        value(v.args(), depth + 1);
        value(v.kwargs(), depth + 1);
        const auto appended = v.appended();
        u32(static_cast<std::uint32_t>(appended.size()));
        for (const auto& x : appended) value(x, depth + 1);
        items(v.set_items(), depth);
        const auto states = v.build_states();
        u32(static_cast<std::uint32_t>(states.size()));
        for (const auto& x : states) value(x, depth + 1);
        return;
      }
      case Kind::kPersistent:
        byte('P' | mark);
        value(v.persistent_id(), depth + 1);
        return;
      default:
        byte('N');
        return;
    }
  }

  void items(std::span<const pickle::DictItem> items, std::size_t depth) {
    u32(static_cast<std::uint32_t>(items.size()));
    for (const auto& item : items) {
      value(item.key, depth + 1);
      value(item.value, depth + 1);
    }
  }

  void byte(int b) { out_.push_back(static_cast<std::uint8_t>(b)); }
  void u32(std::uint32_t n) { raw(&n, 4); }  // little-endian hosts only (as the rest of maploc)
  void raw(const void* p, std::size_t n) {
    const auto* b = static_cast<const std::uint8_t*>(p);
    out_.insert(out_.end(), b, b + n);
  }
  void str(std::string_view s) {
    u32(static_cast<std::uint32_t>(s.size()));
    raw(s.data(), s.size());
  }

  const torch::Checkpoint& c_;
  std::unordered_map<const void*, std::size_t> nodes_;
  std::unordered_map<std::uint64_t, std::size_t> handles_;
  std::unordered_map<const void*, std::uint32_t> ids_;
  std::uint32_t next_id_ = 0;
  std::vector<std::uint8_t> out_;
};

// A storage as a 1-D uint8 DLPack tensor holding its placement alive.
struct StorageExport {
  DLManagedTensor managed{};
  std::shared_ptr<void> owner;
  std::int64_t shape[1]{};
  std::int64_t stride[1]{1};
};

// A tensor of a checkpoint or of a loaded one (same list, same indices).
const torch::Tensor& tensor_at(const std::vector<torch::Tensor>& tensors, std::size_t index) {
  capi::check_index(index, tensors.size(), "tensor");
  return tensors[index];
}

const std::vector<torch::Tensor>& tensors_of(const maploc_loaded* loaded) {
  capi::require(loaded, "the loaded checkpoint");
  return loaded->loaded.tensors();
}

void extra(const std::vector<torch::Tensor>& tensors, std::size_t index, maploc_tensor_extra* out) {
  capi::require(out, "the output struct");
  const auto& t = tensor_at(tensors, index);
  *out = maploc_tensor_extra{};
  out->subclass = t.subclass.c_str();
  out->qscheme = t.quantizer ? t.quantizer->qscheme.c_str() : "";
  out->q_axis = -1;
  if (t.quantizer) {
    out->q_scale = t.quantizer->scale;
    out->q_zero_point = t.quantizer->zero_point;
    out->q_axis = t.quantizer->axis;
  }
  out->held_by = t.held_by ? static_cast<int64_t>(*t.held_by) : -1;
  out->is_component = t.is_component;
  out->device = t.device.c_str();
  out->component_count = t.components.size();
  out->attribute_count = t.attributes.size();
}

void component(const std::vector<torch::Tensor>& tensors, std::size_t index, std::size_t k, const char** role,
               size_t* tensor) {
  capi::require(role, "the output role");
  capi::require(tensor, "the output tensor index");
  const auto& t = tensor_at(tensors, index);
  capi::check_index(k, t.components.size(), "component");
  *role = t.components[k].role.c_str();
  *tensor = t.components[k].tensor;
}

void attribute(const std::vector<torch::Tensor>& tensors, std::size_t index, std::size_t k, const char** name,
               const char** json) {
  capi::require(name, "the output name");
  capi::require(json, "the output JSON");
  const auto& t = tensor_at(tensors, index);
  capi::check_index(k, t.attributes.size(), "attribute");
  *name = t.attributes[k].name.c_str();
  *json = t.attributes[k].json.c_str();
}

}  // namespace

extern "C" {

int maploc_open_memory(const void* data, size_t size, const char* name, maploc_checkpoint** out) {
  return guarded([&] {
    capi::require(out, "the output pointer");
    *out = nullptr;
    if (data == nullptr && size != 0) capi::invalid("the data is NULL");
    const auto* p = static_cast<const std::uint8_t*>(data);
    std::vector<std::uint8_t> copy(p, p + size);
    auto file = MappedFile::from_bytes(Bytes::owned(std::move(copy)), name == nullptr ? "<memory>" : name);
    *out = new maploc_checkpoint{torch::Checkpoint::from_file(std::move(file))};
  });
}

int maploc_checkpoint_object(const maploc_checkpoint* checkpoint, uint8_t** out, size_t* size) {
  return guarded([&] {
    const auto& c = capi::checkpoint_of(checkpoint);
    capi::require(out, "the output pointer");
    capi::require(size, "the output size");
    *out = nullptr;
    *size = 0;
    const auto bytes = Writer(c).run();
    auto* buffer = static_cast<std::uint8_t*>(std::malloc(bytes.empty() ? 1 : bytes.size()));
    if (buffer == nullptr) throw std::bad_alloc();
    std::memcpy(buffer, bytes.data(), bytes.size());
    *out = buffer;
    *size = bytes.size();
  });
}

void maploc_buffer_free(void* buffer) { std::free(buffer); }

const char* maploc_error_code_name(int code) {
  if (code == MAPLOC_OK) return "kOk";
  if (code == MAPLOC_E_INTERNAL) return "kInternal";
  return error_code_name(static_cast<ErrorCode>(code)).data();  // NUL-terminated literals
}

int maploc_loaded_storage_dlpack(const maploc_loaded* loaded, size_t index, DLManagedTensor** out) {
  return guarded([&] {
    capi::require(loaded, "the loaded checkpoint");
    capi::require(out, "the output pointer");
    *out = nullptr;
    capi::check_index(index, loaded->loaded.storages().size(), "storage");
    const auto& s = loaded->loaded.storages()[index];
    DLDevice device{kDLCPU, 0};
    switch (s.device.kind) {
      case remap::Device::Kind::kCpu: device = {s.pinned ? kDLCUDAHost : kDLCPU, 0}; break;
      case remap::Device::Kind::kCuda: device = {kDLCUDA, s.device.index}; break;
      default:
        throw Error(ErrorCode::kTorchNotConvertible, Stage::kRemap,
                    "storage " + std::to_string(index) + " is on " + s.device.str() + ", which holds no bytes");
    }
    auto e = std::make_unique<StorageExport>();
    e->owner = s.owner;
    e->shape[0] = static_cast<std::int64_t>(s.nbytes);
    auto& t = e->managed.dl_tensor;
    t.data = s.data;
    t.device = device;
    t.ndim = 1;
    t.dtype = DLDataType{kDLUInt, 8, 1};
    t.shape = e->shape;
    t.strides = e->stride;
    t.byte_offset = 0;
    e->managed.manager_ctx = e.get();
    e->managed.deleter = [](DLManagedTensor* self) { delete static_cast<StorageExport*>(self->manager_ctx); };
    *out = &e.release()->managed;
  });
}

int maploc_checkpoint_tensor_extra(const maploc_checkpoint* checkpoint, size_t index, maploc_tensor_extra* out) {
  return guarded([&] { extra(capi::checkpoint_of(checkpoint).tensors(), index, out); });
}

int maploc_loaded_tensor_extra(const maploc_loaded* loaded, size_t index, maploc_tensor_extra* out) {
  return guarded([&] { extra(tensors_of(loaded), index, out); });
}

int maploc_checkpoint_tensor_component(const maploc_checkpoint* checkpoint, size_t index, size_t k, const char** role,
                                       size_t* tensor) {
  return guarded([&] { component(capi::checkpoint_of(checkpoint).tensors(), index, k, role, tensor); });
}

int maploc_loaded_tensor_component(const maploc_loaded* loaded, size_t index, size_t k, const char** role,
                                   size_t* tensor) {
  return guarded([&] { component(tensors_of(loaded), index, k, role, tensor); });
}

int maploc_checkpoint_tensor_attribute(const maploc_checkpoint* checkpoint, size_t index, size_t k, const char** name,
                                       const char** json) {
  return guarded([&] { attribute(capi::checkpoint_of(checkpoint).tensors(), index, k, name, json); });
}

int maploc_loaded_tensor_attribute(const maploc_loaded* loaded, size_t index, size_t k, const char** name,
                                   const char** json) {
  return guarded([&] { attribute(tensors_of(loaded), index, k, name, json); });
}

}  // extern "C"
