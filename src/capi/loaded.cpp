// loaded.cpp - the C API's loaded checkpoints: load with a SPEC, list placements, move, hash, export DLPack.
#include <dlfcn.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>

#include "handles.h"
#include "maploc/remap/dlpack.h"

using namespace maploc;
using capi::guarded;

namespace {

const maploc_loaded& loaded_of(const maploc_loaded* l) {
  capi::require(l, "the loaded checkpoint");
  return *l;
}

void refresh_devices(maploc_loaded& l) {
  l.devices.clear();
  for (const auto& s : l.loaded.storages()) l.devices.push_back(s.device.str());
}

remap::HostMemory host_memory(int32_t host) {
  switch (host) {
    case MAPLOC_HOST_VIEW: return remap::HostMemory::kMappedView;
    case MAPLOC_HOST_COPY: return remap::HostMemory::kOwnedCopy;
    case MAPLOC_HOST_PINNED: return remap::HostMemory::kPinned;
    default:
      capi::invalid("host memory " + std::to_string(host) +
                    " is none of MAPLOC_HOST_VIEW (0), MAPLOC_HOST_COPY (1), MAPLOC_HOST_PINNED (2)");
  }
}

// A device spelling resolved as a SPEC target is (cpu, cuda, cuda:N, cuda:local, auto, meta).
remap::Device device_of_spelling(const char* spelling) {
  const std::vector<std::string> names;
  const remap::StorageRef ref{"(the device argument of maploc_loaded_to)", "", 0, "", names};
  return remap::decide({&ref, 1}, remap::MapLocation::all_to(spelling), remap::DeviceInventory::probe()).at(0);
}

// DLPack 1.0's DLManagedTensorVersioned, laid out as its ABI says (dlpack.h 1.x), whatever header this
// build has: Debian's is 0.6. It wraps the 0.x export (manager_ctx), whose DLTensor it copies.
struct VersionV1 {
  std::uint32_t major;
  std::uint32_t minor;
};
struct ManagedV1 {
  VersionV1 version;
  void* manager_ctx;
  void (*deleter)(ManagedV1* self);
  std::uint64_t flags;
  DLTensor dl_tensor;
};
#if defined(DLPACK_MAJOR_VERSION) && DLPACK_MAJOR_VERSION >= 1
static_assert(sizeof(ManagedV1) == sizeof(DLManagedTensorVersioned) &&
              offsetof(ManagedV1, dl_tensor) == offsetof(DLManagedTensorVersioned, dl_tensor));
#endif
constexpr std::uint64_t kReadOnlyV1 = 1;  // DLPACK_FLAG_BITMASK_READ_ONLY
constexpr std::uint8_t kBoolV1 = 6;       // kDLBool (DLPack >= 0.8)

ManagedV1* dlpack_v1(const remap::Loaded& loaded, std::size_t index) {
  DLManagedTensor* inner = remap::to_dlpack(loaded, index);
  auto v1 = std::make_unique<ManagedV1>();
  v1->version = {1, 0};
  v1->manager_ctx = inner;
  v1->deleter = [](ManagedV1* self) {
    auto* wrapped = static_cast<DLManagedTensor*>(self->manager_ctx);
    if (wrapped->deleter != nullptr) wrapped->deleter(wrapped);
    delete self;
  };
  v1->dl_tensor = inner->dl_tensor;  // shape and strides stay the inner export's, alive as long as it
  const auto& t = loaded.tensors()[index];
  if (t.dtype == torch::DType::kBool) v1->dl_tensor.dtype = {kBoolV1, 8, 1};
  v1->flags = loaded.storages()[*t.storage].writable ? 0 : kReadOnlyV1;
  return v1.release();
}

// The pointer a PyCapsule still named `name` holds, or null: consumed (renamed "used_..."; the consumer
// owns the tensor), or no Python in this process. Python's own functions are found once in the running
// interpreter, so libmaploc.so does not link Python.
void* unconsumed_capsule(void* capsule, const char* name) {
  using IsValid = int (*)(void*, const char*);
  using GetPointer = void* (*)(void*, const char*);
  static const auto is_valid = reinterpret_cast<IsValid>(::dlsym(RTLD_DEFAULT, "PyCapsule_IsValid"));
  static const auto get_pointer = reinterpret_cast<GetPointer>(::dlsym(RTLD_DEFAULT, "PyCapsule_GetPointer"));
  if (capsule == nullptr || is_valid == nullptr || get_pointer == nullptr) return nullptr;
  if (is_valid(capsule, name) == 0) return nullptr;
  return get_pointer(capsule, name);
}

}  // namespace

extern "C" {

void maploc_load_options_init(maploc_load_options* options) {
  if (options != nullptr) *options = maploc_load_options{};
}

int maploc_load(const maploc_checkpoint* checkpoint, const maploc_load_options* options, maploc_loaded** out) {
  return guarded([&] {
    const auto& c = capi::checkpoint_of(checkpoint);
    capi::require(out, "the output pointer");
    *out = nullptr;
    maploc_load_options given{};
    if (options != nullptr) given = *options;
    remap::LoadOptions o;
    o.map = capi::parse_spec(given.map_location);
    o.host = host_memory(given.host);
    o.writable = given.writable != 0;
    o.populate = given.populate != 0;
    o.host_threads = given.host_threads;
    if (given.cuda_stream != nullptr) o.cuda.streams.push_back({given.cuda_stream_device, given.cuda_stream});
    auto l = std::make_unique<maploc_loaded>();
    l->loaded = remap::load(c, o);
    for (const auto& s : c.storages()) {
      l->keys.push_back(s.key);
      l->locations.push_back(s.location);
      l->dtypes.push_back(s.dtype);
    }
    refresh_devices(*l);
    *out = l.release();
  });
}

void maploc_loaded_free(maploc_loaded* loaded) { delete loaded; }

size_t maploc_loaded_tensor_count(const maploc_loaded* loaded) {
  return loaded == nullptr ? 0 : loaded->loaded.tensors().size();
}

size_t maploc_loaded_storage_count(const maploc_loaded* loaded) {
  return loaded == nullptr ? 0 : loaded->loaded.storages().size();
}

int maploc_loaded_tensor(const maploc_loaded* loaded, size_t index, maploc_tensor_info* out) {
  return guarded([&] {
    const auto& l = loaded_of(loaded);
    capi::require(out, "the output struct");
    capi::check_index(index, l.loaded.tensors().size(), "tensor");
    const auto& t = l.loaded.tensors()[index];
    capi::describe_tensor(t, out);
    if (!t.storage) {
      out->device = l.loaded.device_of(index).kind == remap::Device::Kind::kMeta ? "meta" : "cpu";
      return;
    }
    const auto& placed = l.loaded.storages()[*t.storage];
    out->location = l.locations[*t.storage].c_str();
    out->device = l.devices[*t.storage].c_str();
    if (placed.data != nullptr) {
      out->data = static_cast<char*>(placed.data) +
                  static_cast<std::uint64_t>(t.storage_offset) * torch::element_size(t.dtype);
    }
  });
}

int maploc_loaded_storage(const maploc_loaded* loaded, size_t index, maploc_storage_info* out) {
  return guarded([&] {
    const auto& l = loaded_of(loaded);
    capi::require(out, "the output struct");
    capi::check_index(index, l.loaded.storages().size(), "storage");
    const auto& s = l.loaded.storages()[index];
    *out = maploc_storage_info{};
    out->key = l.keys[index].c_str();
    out->dtype = torch::dtype_name(l.dtypes[index]).data();
    out->nbytes = s.nbytes;
    out->location = l.locations[index].c_str();
    out->device = l.devices[index].c_str();
    out->data = s.data;
    out->writable = s.writable;
    out->pinned = s.pinned;
  });
}

int maploc_loaded_find(const maploc_loaded* loaded, const char* name, size_t* index) {
  return guarded([&] {
    const auto& l = loaded_of(loaded);
    capi::require(name, "the name");
    capi::require(index, "the output index");
    const auto found = l.loaded.find(name);
    if (!found) capi::invalid(std::string("no tensor is named '") + name + "'");
    *index = *found;
  });
}

int maploc_loaded_set_cuda_stream(maploc_loaded* loaded, int device, void* stream) {
  return guarded([&] {
    capi::require(loaded, "the loaded checkpoint");
    remap::CudaOptions cuda = loaded->loaded.cuda_options();
    std::erase_if(cuda.streams, [&](const remap::CallerStream& c) { return c.device == device; });
    if (stream != nullptr) cuda.streams.push_back({device, stream});
    loaded->loaded.set_cuda_options(std::move(cuda));
  });
}

int maploc_loaded_to(maploc_loaded* loaded, const char* device, const char* name_glob) {
  return guarded([&] {
    capi::require(loaded, "the loaded checkpoint");
    capi::require(device, "the device");
    loaded->loaded.to(device_of_spelling(device), name_glob == nullptr ? "*" : name_glob);
    refresh_devices(*loaded);
  });
}

int maploc_loaded_tensor_sha256(const maploc_loaded* loaded, size_t index, char* out) {
  return guarded([&] {
    const auto& l = loaded_of(loaded);
    capi::require(out, "the output buffer");
    capi::check_index(index, l.loaded.tensors().size(), "tensor");
    const std::string hex = l.loaded.tensor_sha256(index);
    std::memcpy(out, hex.c_str(), hex.size() + 1);
  });
}

int maploc_loaded_dlpack(const maploc_loaded* loaded, size_t index, DLManagedTensor** out) {
  return guarded([&] {
    const auto& l = loaded_of(loaded);
    capi::require(out, "the output pointer");
    *out = nullptr;
    *out = remap::to_dlpack(l.loaded, index);
  });
}

void maploc_dlpack_free(DLManagedTensor* t) {
  if (t != nullptr && t->deleter != nullptr) t->deleter(t);
}

void maploc_dlpack_capsule_destructor(void* capsule) {
  if (auto* t = static_cast<DLManagedTensor*>(unconsumed_capsule(capsule, "dltensor"))) maploc_dlpack_free(t);
}

int maploc_loaded_dlpack_versioned(const maploc_loaded* loaded, size_t index, DLManagedTensorVersioned** out) {
  return guarded([&] {
    const auto& l = loaded_of(loaded);
    capi::require(out, "the output pointer");
    *out = nullptr;
    *out = reinterpret_cast<DLManagedTensorVersioned*>(dlpack_v1(l.loaded, index));
  });
}

void maploc_dlpack_versioned_capsule_destructor(void* capsule) {
  auto* t = static_cast<ManagedV1*>(unconsumed_capsule(capsule, "dltensor_versioned"));
  if (t != nullptr && t->deleter != nullptr) t->deleter(t);
}

}  // extern "C"
