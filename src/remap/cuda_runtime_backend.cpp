// cuda_runtime_backend.cpp - the CUDA runtime behind DeviceBackend, loaded with dlopen at run time.
// Its types come from cuda_api.h (declared from NVIDIA's documented API, checked against the real
// header where the toolkit exists), so every build compiles it, on any machine, and one binary runs
// with and without CUDA. In CI it runs against the CUDA runtime stand-in (tests/cudart_standin).
#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <set>
#include <utility>

#include "cuda_api.h"
#include "device_backend.h"

namespace maploc::remap::detail {
namespace {

// The oldest runtime whose API and structures match what maploc calls (CUDA 11.0).
constexpr int kMinRuntimeVersion = 11000;

// Every runtime entry point maploc uses, resolved once.
struct Api {
  cuda::RuntimeGetVersionFn runtime_version;
  cuda::DriverGetVersionFn driver_version;
  cuda::GetDeviceCountFn device_count;
  cuda::GetDeviceFn get_device;
  cuda::SetDeviceFn set_device;
  cuda::MemGetInfoFn mem_info;
  cuda::MallocFn malloc;
  cuda::FreeFn free;
  cuda::HostAllocFn host_alloc;
  cuda::FreeHostFn free_host;
  cuda::StreamCreateWithFlagsFn stream_create;
  cuda::StreamDestroyFn stream_destroy;
  cuda::StreamSynchronizeFn stream_sync;
  cuda::StreamWaitEventFn stream_wait_event;
  cuda::EventCreateWithFlagsFn event_create;
  cuda::EventDestroyFn event_destroy;
  cuda::EventRecordFn event_record;
  cuda::EventSynchronizeFn event_sync;
  cuda::MemcpyAsyncFn memcpy_async;
  cuda::MemcpyPeerAsyncFn memcpy_peer_async;
  cuda::DeviceCanAccessPeerFn can_access_peer;
  cuda::DeviceEnablePeerAccessFn enable_peer_access;
  cuda::PointerGetAttributesFn pointer_attributes;
  cuda::GetErrorNameFn error_name;
  cuda::GetErrorStringFn error_string;
  cuda::GetLastErrorFn last_error;
};

// The driver calls that tell whether a device already has its primary context (optional: without
// them the device guard restores the caller's device unconditionally, as before CUDA 12).
struct DriverApi {
  cuda::CuInitFn init = nullptr;
  cuda::CuDeviceGetFn device_get = nullptr;
  cuda::CuDevicePrimaryCtxGetStateFn primary_state = nullptr;
};

template <class F>
bool resolve(void* lib, const char* name, F& out, std::string* missing) {
  out = reinterpret_cast<F>(::dlsym(lib, name));
  if (out == nullptr && missing->empty()) *missing = name;
  return out != nullptr;
}

bool resolve_all(void* lib, Api& api, std::string* missing) {
  bool ok = resolve(lib, "cudaRuntimeGetVersion", api.runtime_version, missing);
  ok = resolve(lib, "cudaDriverGetVersion", api.driver_version, missing) && ok;
  ok = resolve(lib, "cudaGetDeviceCount", api.device_count, missing) && ok;
  ok = resolve(lib, "cudaGetDevice", api.get_device, missing) && ok;
  ok = resolve(lib, "cudaSetDevice", api.set_device, missing) && ok;
  ok = resolve(lib, "cudaMemGetInfo", api.mem_info, missing) && ok;
  ok = resolve(lib, "cudaMalloc", api.malloc, missing) && ok;
  ok = resolve(lib, "cudaFree", api.free, missing) && ok;
  ok = resolve(lib, "cudaHostAlloc", api.host_alloc, missing) && ok;
  ok = resolve(lib, "cudaFreeHost", api.free_host, missing) && ok;
  ok = resolve(lib, "cudaStreamCreateWithFlags", api.stream_create, missing) && ok;
  ok = resolve(lib, "cudaStreamDestroy", api.stream_destroy, missing) && ok;
  ok = resolve(lib, "cudaStreamSynchronize", api.stream_sync, missing) && ok;
  ok = resolve(lib, "cudaStreamWaitEvent", api.stream_wait_event, missing) && ok;
  ok = resolve(lib, "cudaEventCreateWithFlags", api.event_create, missing) && ok;
  ok = resolve(lib, "cudaEventDestroy", api.event_destroy, missing) && ok;
  ok = resolve(lib, "cudaEventRecord", api.event_record, missing) && ok;
  ok = resolve(lib, "cudaEventSynchronize", api.event_sync, missing) && ok;
  ok = resolve(lib, "cudaMemcpyAsync", api.memcpy_async, missing) && ok;
  ok = resolve(lib, "cudaMemcpyPeerAsync", api.memcpy_peer_async, missing) && ok;
  ok = resolve(lib, "cudaDeviceCanAccessPeer", api.can_access_peer, missing) && ok;
  ok = resolve(lib, "cudaDeviceEnablePeerAccess", api.enable_peer_access, missing) && ok;
  ok = resolve(lib, "cudaPointerGetAttributes", api.pointer_attributes, missing) && ok;
  ok = resolve(lib, "cudaGetErrorName", api.error_name, missing) && ok;
  ok = resolve(lib, "cudaGetErrorString", api.error_string, missing) && ok;
  ok = resolve(lib, "cudaGetLastError", api.last_error, missing) && ok;
  return ok;
}

// The driver's calls: from the library itself (the stand-in exports them), else libcuda.so.1,
// which a process with a working runtime has loaded already.
DriverApi resolve_driver(void* lib) {
  DriverApi d;
  std::string ignored;
  for (void* from : {lib, ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD)}) {
    if (from == nullptr) continue;
    DriverApi candidate;
    if (resolve(from, "cuInit", candidate.init, &ignored) && resolve(from, "cuDeviceGet", candidate.device_get, &ignored) &&
        resolve(from, "cuDevicePrimaryCtxGetState", candidate.primary_state, &ignored)) {
      return candidate;
    }
  }
  return d;
}

std::string version_text(int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); }

class CudaRuntime final : public DeviceBackend {
 public:
  CudaRuntime(const Api& api, const DriverApi& driver, std::string library, int version, int driver_version,
              int count)
      : api_(api), driver_(driver), library_(std::move(library)), version_(version),
        driver_version_(driver_version), count_(count) {}
  ~CudaRuntime() override { release_staging(); }

  std::string name() const override {
    return "CUDA runtime " + version_text(version_) + " (" + library_ + "), driver " +
           (driver_version_ > 0 ? version_text(driver_version_) : std::string("none"));
  }
  int device_count() override { return count_; }
  Status get_device(int* device) override { return api_.get_device(device); }
  Status set_device(int device) override { return api_.set_device(device); }
  Status context_active(int device, bool* active) override {
    *active = true;  // unknown: assume it exists (restoring is then always allowed)
    if (driver_.primary_state == nullptr) return 0;
    int dev = 0;
    unsigned flags = 0;
    int on = 0;
    if (driver_.init(0) != 0 || driver_.device_get(&dev, device) != 0 || driver_.primary_state(dev, &flags, &on) != 0) {
      return 0;
    }
    *active = on != 0;
    return 0;
  }
  Status mem_info(std::uint64_t* free, std::uint64_t* total) override {
    std::size_t f = 0, t = 0;
    const Status rc = api_.mem_info(&f, &t);
    *free = f;
    *total = t;
    return rc;
  }
  Status device_alloc(void** p, std::uint64_t n) override { return api_.malloc(p, n); }
  Status device_free(void* p) override { return api_.free(p); }
  Status pinned_alloc(void** p, std::uint64_t n) override {
    return api_.host_alloc(p, n, cuda::kHostAllocPortable);
  }
  Status pinned_free(void* p) override { return api_.free_host(p); }
  Status stream_create(Stream* s) override {
    cuda::Stream stream = nullptr;
    const Status rc = api_.stream_create(&stream, cuda::kStreamNonBlocking);
    *s = stream;
    return rc;
  }
  Status stream_destroy(Stream s) override { return api_.stream_destroy(static_cast<cuda::Stream>(s)); }
  Status stream_sync(Stream s) override { return api_.stream_sync(static_cast<cuda::Stream>(s)); }
  Status stream_wait_event(Stream s, Event e) override {
    return api_.stream_wait_event(static_cast<cuda::Stream>(s), static_cast<cuda::Event>(e), 0);
  }
  Status event_create(Event* e) override {
    // Blocking sync: a waiting thread sleeps instead of spinning on a core the readers need.
    cuda::Event event = nullptr;
    const Status rc = api_.event_create(&event, cuda::kEventDisableTiming | cuda::kEventBlockingSync);
    *e = event;
    return rc;
  }
  Status event_destroy(Event e) override { return api_.event_destroy(static_cast<cuda::Event>(e)); }
  Status event_record(Event e, Stream s) override {
    // A null stream is the legacy default stream of the current device (not the per-thread one).
    return api_.event_record(static_cast<cuda::Event>(e), s == nullptr ? cuda::legacy_stream() : static_cast<cuda::Stream>(s));
  }
  Status event_sync(Event e) override { return api_.event_sync(static_cast<cuda::Event>(e)); }
  Status copy_async(void* dst, const void* src, std::uint64_t n, CopyKind kind, Stream s) override {
    const int k = kind == CopyKind::kHostToDevice   ? cuda::kMemcpyHostToDevice
                  : kind == CopyKind::kDeviceToHost ? cuda::kMemcpyDeviceToHost
                                                    : cuda::kMemcpyDeviceToDevice;
    return api_.memcpy_async(dst, src, n, k, static_cast<cuda::Stream>(s));
  }
  Status copy_peer_async(void* dst, int dst_device, const void* src, int src_device, std::uint64_t n,
                         Stream s) override {
    enable_peer(dst_device, src_device);
    return api_.memcpy_peer_async(dst, dst_device, src, src_device, n, static_cast<cuda::Stream>(s));
  }
  Status pointer_info(const void* p, PointerInfo* info) override {
    info->device = -1;
    info->kind = PointerKind::kHost;
    // cudaPointerGetAttributes initialises the runtime on the current device: ask it from a device
    // whose context exists; where none exists, no device or pinned memory exists in this process.
    int current = 0;
    if (api_.get_device(&current) != cuda::kSuccess) current = 0;
    bool active = false;
    context_active(current, &active);
    int chosen = active ? current : -1;
    for (int d = 0; chosen < 0 && d < count_; ++d) {
      if (context_active(d, &active) == 0 && active) chosen = d;
    }
    if (chosen < 0) return 0;
    if (chosen != current && api_.set_device(chosen) != cuda::kSuccess) return api_.last_error();
    cuda::PointerAttributesRoom room{};
    const Status rc = api_.pointer_attributes(&room.attributes, p);
    if (chosen != current) api_.set_device(current);  // its context exists: set_device creates nothing
    if (rc != cuda::kSuccess) {
      api_.last_error();
      return rc;
    }
    const cuda::PointerAttributes& attr = room.attributes;
    if (attr.type == cuda::kMemoryTypeDevice || attr.type == cuda::kMemoryTypeManaged) {
      info->kind = PointerKind::kDevice;
      info->device = attr.device;
    } else if (attr.type == cuda::kMemoryTypeHost) {
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
    if (api_.can_access_peer(&can, dst, src) != cuda::kSuccess || can == 0) {
      api_.last_error();
      return;
    }
    const DeviceGuard guard(this);
    if (api_.set_device(dst) != cuda::kSuccess) {
      api_.last_error();
      return;
    }
    if (api_.enable_peer_access(src, 0) != cuda::kSuccess) api_.last_error();  // already enabled: fine
  }

  std::string error_text(Status status) override {
    api_.last_error();  // clear a non-sticky error so the next call is not blamed for it
    return std::string(api_.error_name(status)) + " (" + api_.error_string(status) + ")";
  }

 private:
  Api api_;
  DriverApi driver_;
  std::string library_;
  int version_;
  int driver_version_;
  int count_;
  std::mutex peer_mutex_;
  std::set<std::pair<int, int>> peer_tried_;
};

}  // namespace

std::shared_ptr<DeviceBackend> load_cuda_runtime(const std::string& libraries, std::string* why) {
  std::string tried;
  // Libraries are separated by " | ": messages put the note in parentheses before "; map it".
  auto note = [&](const std::string& s) { tried += (tried.empty() ? "" : " | ") + s; };
  std::shared_ptr<DeviceBackend> without_device;  // a working runtime that sees no device
  for (std::size_t begin = 0; begin <= libraries.size();) {
    std::size_t end = libraries.find(':', begin);
    if (end == std::string::npos) end = libraries.size();
    const std::string library = libraries.substr(begin, end - begin);
    begin = end + 1;
    if (library.empty()) continue;
    void* lib = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      const char* err = ::dlerror();
      note(err ? err : library + ": cannot be loaded");
      continue;
    }
    Api api{};
    std::string missing;
    bool ok = resolve_all(lib, api, &missing);
    int version = 0;
    if (ok && (api.runtime_version(&version) != cuda::kSuccess || version < kMinRuntimeVersion)) {
      missing = "a runtime version of at least 11.0 (it reports " + std::to_string(version) + ")";
      ok = false;
    }
    if (!ok) {
      note(library + " is not a usable CUDA runtime (it lacks " + missing + ")");
      ::dlclose(lib);
      continue;
    }
    int driver = 0;
    if (api.driver_version(&driver) != cuda::kSuccess) driver = 0;
    int count = 0;
    const cuda::Error rc = api.device_count(&count);
    const std::string described = library + " (runtime " + version_text(version) + ", driver " +
                                  (driver > 0 ? version_text(driver) : std::string("none: no NVIDIA driver is loaded")) +
                                  ")";
    if (rc != cuda::kSuccess || count <= 0) {
      api.last_error();
      const std::string err =
          rc != cuda::kSuccess ? std::string(api.error_name(rc)) + " (" + api.error_string(rc) + ")" : "0 devices";
      note(described + " finds no device: " + err);
      // A runtime newer than the driver: an older runtime further down the list may still work.
      // Never unloaded: a runtime that has been initialised is not safe to unload.
      if (rc == cuda::kErrorInsufficientDriver || without_device) continue;
      without_device = std::make_shared<CudaRuntime>(api, resolve_driver(lib), library, version, driver, 0);
      continue;
    }
    // Never unloaded: storages and staging buffers may outlive any one load.
    *why = tried;  // what was tried before this one, for the record
    return std::make_shared<CudaRuntime>(api, resolve_driver(lib), library, version, driver, count);
  }
  *why = "no CUDA device is usable: " + tried +
         ". A GPU with its NVIDIA driver and a CUDA runtime 11 or later no newer than the driver "
         "(libcudart.so.12 or .13, e.g. the cuda-cudart package) are needed, MAPLOC_CUDART=/path/to/libcudart.so.N "
         "chooses the runtime";
  return without_device;
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
