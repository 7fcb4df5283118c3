// cuda_runtime_backend.cpp - the CUDA runtime behind DeviceBackend, loaded with dlopen at run time:
// the toolkit's header gives the types, no library is linked, so one binary runs with and without CUDA.
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <set>
#include <utility>

#include "device_backend.h"

namespace maploc::remap::detail {
namespace {

// The oldest runtime whose API and structures match what maploc calls (CUDA 11.0).
constexpr int kMinRuntimeVersion = 11000;

// Every runtime entry point maploc uses, resolved once.
struct Api {
  decltype(&::cudaRuntimeGetVersion) runtime_version;
  decltype(&::cudaGetDeviceCount) device_count;
  decltype(&::cudaGetDevice) get_device;
  decltype(&::cudaSetDevice) set_device;
  decltype(&::cudaMemGetInfo) mem_info;
  decltype(&::cudaMalloc) malloc;
  decltype(&::cudaFree) free;
  decltype(&::cudaHostAlloc) host_alloc;
  decltype(&::cudaFreeHost) free_host;
  decltype(&::cudaStreamCreateWithFlags) stream_create;
  decltype(&::cudaStreamDestroy) stream_destroy;
  decltype(&::cudaStreamSynchronize) stream_sync;
  decltype(&::cudaEventCreateWithFlags) event_create;
  decltype(&::cudaEventDestroy) event_destroy;
  decltype(&::cudaEventRecord) event_record;
  decltype(&::cudaEventSynchronize) event_sync;
  decltype(&::cudaMemcpyAsync) memcpy_async;
  decltype(&::cudaMemcpyPeerAsync) memcpy_peer_async;
  decltype(&::cudaDeviceCanAccessPeer) can_access_peer;
  decltype(&::cudaDeviceEnablePeerAccess) enable_peer_access;
  decltype(&::cudaPointerGetAttributes) pointer_attributes;
  decltype(&::cudaGetErrorName) error_name;
  decltype(&::cudaGetErrorString) error_string;
  decltype(&::cudaGetLastError) last_error;
};

template <class F>
bool resolve(void* lib, const char* name, F& out, std::string* missing) {
  out = reinterpret_cast<F>(::dlsym(lib, name));
  if (out == nullptr && missing->empty()) *missing = name;
  return out != nullptr;
}

class CudaRuntime final : public DeviceBackend {
 public:
  CudaRuntime(const Api& api, std::string library, int version)
      : api_(api), library_(std::move(library)), version_(version) {}
  ~CudaRuntime() override { release_staging(); }

  std::string name() const override {
    return "CUDA runtime " + std::to_string(version_ / 1000) + "." + std::to_string(version_ % 1000 / 10) + " (" +
           library_ + ")";
  }
  int device_count() override {
    int known = count_.load(std::memory_order_relaxed);
    if (known >= 0) return known;
    int n = 0;
    if (api_.device_count(&n) != cudaSuccess) {
      api_.last_error();  // no driver (35), no device (100): no device, not an error
      n = 0;
    }
    count_.store(n, std::memory_order_relaxed);
    return n;
  }
  Status get_device(int* device) override { return api_.get_device(device); }
  Status set_device(int device) override { return api_.set_device(device); }
  Status mem_info(std::uint64_t* free, std::uint64_t* total) override {
    std::size_t f = 0, t = 0;
    const Status rc = api_.mem_info(&f, &t);
    *free = f;
    *total = t;
    return rc;
  }
  Status device_alloc(void** p, std::uint64_t n) override { return api_.malloc(p, n); }
  Status device_free(void* p) override { return api_.free(p); }
  Status pinned_alloc(void** p, std::uint64_t n) override { return api_.host_alloc(p, n, cudaHostAllocPortable); }
  Status pinned_free(void* p) override { return api_.free_host(p); }
  Status stream_create(Stream* s) override {
    cudaStream_t stream = nullptr;
    const Status rc = api_.stream_create(&stream, cudaStreamNonBlocking);
    *s = stream;
    return rc;
  }
  Status stream_destroy(Stream s) override { return api_.stream_destroy(static_cast<cudaStream_t>(s)); }
  Status stream_sync(Stream s) override { return api_.stream_sync(static_cast<cudaStream_t>(s)); }
  Status event_create(Event* e) override {
    cudaEvent_t event = nullptr;
    const Status rc = api_.event_create(&event, cudaEventDisableTiming);
    *e = event;
    return rc;
  }
  Status event_destroy(Event e) override { return api_.event_destroy(static_cast<cudaEvent_t>(e)); }
  Status event_record(Event e, Stream s) override {
    return api_.event_record(static_cast<cudaEvent_t>(e), static_cast<cudaStream_t>(s));
  }
  Status event_sync(Event e) override { return api_.event_sync(static_cast<cudaEvent_t>(e)); }
  Status copy_async(void* dst, const void* src, std::uint64_t n, CopyKind kind, Stream s) override {
    const cudaMemcpyKind k = kind == CopyKind::kHostToDevice   ? cudaMemcpyHostToDevice
                             : kind == CopyKind::kDeviceToHost ? cudaMemcpyDeviceToHost
                                                               : cudaMemcpyDeviceToDevice;
    return api_.memcpy_async(dst, src, n, k, static_cast<cudaStream_t>(s));
  }
  Status copy_peer_async(void* dst, int dst_device, const void* src, int src_device, std::uint64_t n,
                         Stream s) override {
    enable_peer(dst_device, src_device);
    return api_.memcpy_peer_async(dst, dst_device, src, src_device, n, static_cast<cudaStream_t>(s));
  }
  Status pointer_info(const void* p, PointerInfo* info) override {
    cudaPointerAttributes attr{};
    const Status rc = api_.pointer_attributes(&attr, p);
    if (rc != cudaSuccess) {
      api_.last_error();
      return rc;
    }
    info->device = -1;
    info->kind = PointerKind::kHost;
    if (attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged) {
      info->kind = PointerKind::kDevice;
      info->device = attr.device;
    } else if (attr.type == cudaMemoryTypeHost) {
      info->kind = PointerKind::kPinnedHost;
    }
    return rc;
  }
  // Direct access from dst to src where the devices allow it (NVLink, PCIe P2P), asked once per
  // pair; without it cudaMemcpyPeerAsync still works, staged by the driver.
  void enable_peer(int dst, int src) {
    if (dst == src) return;
    const std::lock_guard lock(peer_mutex_);
    if (!peer_tried_.insert({dst, src}).second) return;
    int can = 0;
    if (api_.can_access_peer(&can, dst, src) != cudaSuccess || can == 0) {
      api_.last_error();
      return;
    }
    int previous = 0;
    if (api_.get_device(&previous) != cudaSuccess || api_.set_device(dst) != cudaSuccess) {
      api_.last_error();
      return;
    }
    if (api_.enable_peer_access(src, 0) != cudaSuccess) api_.last_error();  // already enabled: fine
    api_.set_device(previous);
  }

  std::string error_text(Status status) override {
    api_.last_error();  // clear a sticky error so the next call is not blamed for it
    const auto rc = static_cast<cudaError_t>(status);
    return std::string(api_.error_name(rc)) + " (" + api_.error_string(rc) + ")";
  }

 private:
  Api api_;
  std::string library_;
  int version_;
  std::atomic<int> count_{-1};
  std::mutex peer_mutex_;
  std::set<std::pair<int, int>> peer_tried_;
};

}  // namespace

std::shared_ptr<DeviceBackend> load_cuda_runtime(const std::string& libraries, std::string* why) {
  std::string tried;
  for (std::size_t begin = 0; begin <= libraries.size();) {
    std::size_t end = libraries.find(':', begin);
    if (end == std::string::npos) end = libraries.size();
    const std::string library = libraries.substr(begin, end - begin);
    begin = end + 1;
    if (library.empty()) continue;
    void* lib = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      const char* err = ::dlerror();
      tried += (tried.empty() ? "" : "; ") + std::string(err ? err : library + ": cannot be loaded");
      continue;
    }
    Api api{};
    std::string missing;
    bool ok = resolve(lib, "cudaRuntimeGetVersion", api.runtime_version, &missing);
    ok = resolve(lib, "cudaGetDeviceCount", api.device_count, &missing) && ok;
    ok = resolve(lib, "cudaGetDevice", api.get_device, &missing) && ok;
    ok = resolve(lib, "cudaSetDevice", api.set_device, &missing) && ok;
    ok = resolve(lib, "cudaMemGetInfo", api.mem_info, &missing) && ok;
    ok = resolve(lib, "cudaMalloc", api.malloc, &missing) && ok;
    ok = resolve(lib, "cudaFree", api.free, &missing) && ok;
    ok = resolve(lib, "cudaHostAlloc", api.host_alloc, &missing) && ok;
    ok = resolve(lib, "cudaFreeHost", api.free_host, &missing) && ok;
    ok = resolve(lib, "cudaStreamCreateWithFlags", api.stream_create, &missing) && ok;
    ok = resolve(lib, "cudaStreamDestroy", api.stream_destroy, &missing) && ok;
    ok = resolve(lib, "cudaStreamSynchronize", api.stream_sync, &missing) && ok;
    ok = resolve(lib, "cudaEventCreateWithFlags", api.event_create, &missing) && ok;
    ok = resolve(lib, "cudaEventDestroy", api.event_destroy, &missing) && ok;
    ok = resolve(lib, "cudaEventRecord", api.event_record, &missing) && ok;
    ok = resolve(lib, "cudaEventSynchronize", api.event_sync, &missing) && ok;
    ok = resolve(lib, "cudaMemcpyAsync", api.memcpy_async, &missing) && ok;
    ok = resolve(lib, "cudaMemcpyPeerAsync", api.memcpy_peer_async, &missing) && ok;
    ok = resolve(lib, "cudaDeviceCanAccessPeer", api.can_access_peer, &missing) && ok;
    ok = resolve(lib, "cudaDeviceEnablePeerAccess", api.enable_peer_access, &missing) && ok;
    ok = resolve(lib, "cudaPointerGetAttributes", api.pointer_attributes, &missing) && ok;
    ok = resolve(lib, "cudaGetErrorName", api.error_name, &missing) && ok;
    ok = resolve(lib, "cudaGetErrorString", api.error_string, &missing) && ok;
    ok = resolve(lib, "cudaGetLastError", api.last_error, &missing) && ok;
    int version = 0;
    if (ok && (api.runtime_version(&version) != cudaSuccess || version < kMinRuntimeVersion)) {
      missing = "a runtime version of at least 11.0 (it reports " + std::to_string(version) + ")";
      ok = false;
    }
    if (!ok) {
      tried += (tried.empty() ? "" : "; ") + library + " is not a usable CUDA runtime (it lacks " + missing + ")";
      ::dlclose(lib);
      continue;
    }
    // Never unloaded: storages and staging buffers may outlive any one load.
    return std::make_shared<CudaRuntime>(api, library, version);
  }
  *why = "no usable CUDA runtime library (" + tried +
         "); install the CUDA runtime 11 or later (libcudart.so.12 or .13, e.g. the cuda-cudart package) "
         "where the dynamic loader finds it, or name it in MAPLOC_CUDART=/path/to/libcudart.so.N";
  return nullptr;
}

std::shared_ptr<DeviceBackend> cuda_runtime(std::string* why) {
  struct Loaded {
    std::shared_ptr<DeviceBackend> backend;
    std::string why;
  };
  // Made once and never destroyed: pinned buffers must not be freed after the
  // runtime itself has been torn down at exit.
  static const Loaded* const loaded = [] {
    auto* l = new Loaded;
    const char* chosen = std::getenv("MAPLOC_CUDART");
    l->backend = load_cuda_runtime(chosen != nullptr && *chosen != '\0'
                                       ? std::string(chosen)
                                       : std::string("libcudart.so.13:libcudart.so.12:libcudart.so.11.0:libcudart.so"),
                                   &l->why);
    return l;
  }();
  if (why != nullptr) *why = loaded->why;
  return loaded->backend;
}

}  // namespace maploc::remap::detail
