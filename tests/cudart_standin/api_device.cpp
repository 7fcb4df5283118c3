// api_device.cpp - the CUDA entry points for versions, devices, memory, peers, errors, and the
// three driver calls.
#include "standin_internal.h"

#include <sys/mman.h>

#include <cstring>

using namespace maploc::standin;
namespace cuda = maploc::remap::cuda;

namespace {

bool valid_device(const State& s, int device) { return device >= 0 && device < static_cast<int>(s.devices.size()); }

struct ErrorText {
  Error code;
  const char* name;
  const char* text;
};
constexpr ErrorText kErrors[] = {
    {0, "cudaSuccess", "no error"},
    {1, "cudaErrorInvalidValue", "invalid argument"},
    {2, "cudaErrorMemoryAllocation", "out of memory"},
    {3, "cudaErrorInitializationError", "initialization error"},
    {35, "cudaErrorInsufficientDriver", "CUDA driver version is insufficient for CUDA runtime version"},
    {100, "cudaErrorNoDevice", "no CUDA-capable device is detected"},
    {101, "cudaErrorInvalidDevice", "invalid device ordinal"},
    {217, "cudaErrorPeerAccessUnsupported", "peer access is not supported between these two devices"},
    {400, "cudaErrorInvalidResourceHandle", "invalid resource handle"},
    {600, "cudaErrorNotReady", "device not ready"},
    {700, "cudaErrorIllegalAddress", "an illegal memory access was encountered"},
    {704, "cudaErrorPeerAccessAlreadyEnabled", "peer access is already enabled"},
    {719, "cudaErrorLaunchFailure", "unspecified launch failure"},
};

const ErrorText* error_text(Error e) {
  for (const ErrorText& t : kErrors)
    if (t.code == e) return &t;
  return nullptr;
}

}  // namespace

STANDIN_EXPORT Error cudaRuntimeGetVersion(int* version) {
  Call c("cudaRuntimeGetVersion");
  if (Error e = c.begin(kVersionQuery)) return e;
  if (!version) return c.ret(cuda::kErrorInvalidValue);
  *version = c.s.config.runtime;
  return 0;
}

STANDIN_EXPORT Error cudaDriverGetVersion(int* version) {
  Call c("cudaDriverGetVersion");
  if (Error e = c.begin(kVersionQuery)) return e;
  if (!version) return c.ret(cuda::kErrorInvalidValue);
  *version = c.s.config.driver;
  return 0;
}

STANDIN_EXPORT Error cudaGetDeviceCount(int* count) {
  Call c("cudaGetDeviceCount");
  if (count) *count = 0;
  if (Error e = c.begin(0)) return e;
  if (!count) return c.ret(cuda::kErrorInvalidValue);
  *count = static_cast<int>(c.s.devices.size());
  return 0;
}

STANDIN_EXPORT Error cudaGetDevice(int* device) {
  Call c("cudaGetDevice");
  if (Error e = c.begin(0)) return e;
  if (!device) return c.ret(cuda::kErrorInvalidValue);
  *device = c.device();
  return 0;
}

STANDIN_EXPORT Error cudaSetDevice(int device) {
  Call c("cudaSetDevice");
  if (Error e = c.begin(0)) return e;
  if (!valid_device(c.s, device)) return c.ret(cuda::kErrorInvalidDevice);
  // Since CUDA 12.0 cudaSetDevice initialises the primary context of the device it selects.
  c.t->device = device;
  create_context(c.s, device);
  return c.s.devices[static_cast<std::size_t>(device)].sticky;
}

STANDIN_EXPORT Error cudaMemGetInfo(std::size_t* free, std::size_t* total) {
  Call c("cudaMemGetInfo");
  if (Error e = c.begin(kNeedsContext)) return e;
  if (!free || !total) return c.ret(cuda::kErrorInvalidValue);
  const Device& d = c.s.devices[static_cast<std::size_t>(c.device())];
  *free = d.capacity - d.used;
  *total = d.capacity;
  return 0;
}

STANDIN_EXPORT Error cudaMalloc(void** p, std::size_t size) {
  Call c("cudaMalloc");
  if (Error e = c.begin(kNeedsContext)) return e;
  if (!p) return c.ret(cuda::kErrorInvalidValue);
  if (size == 0) {
    *p = nullptr;
    return 0;
  }
  return c.ret(device_malloc(c.s, c.device(), size, p));
}

STANDIN_EXPORT Error cudaFree(void* p) {
  Call c("cudaFree");
  if (Error e = c.begin(kNeedsContext)) return e;
  if (!p) return 0;
  const Allocation* a = c.s.allocations.count(reinterpret_cast<uptr>(p)) ? &c.s.allocations.at(reinterpret_cast<uptr>(p)) : nullptr;
  if (!a) return c.ret(cuda::kErrorInvalidValue);
  // cudaFree synchronises implicitly: the pending work of the allocation's device runs first.
  const int device = a->device;
  Error e = complete_device(c.s, device);
  if (Error sticky = c.s.devices[static_cast<std::size_t>(device)].sticky) e = sticky;
  if (e) return c.ret(e);
  return c.ret(device_free(c.s, reinterpret_cast<uptr>(p)));
}

STANDIN_EXPORT Error cudaHostAlloc(void** p, std::size_t size, unsigned flags) {
  Call c("cudaHostAlloc");
  if (Error e = c.begin(kNeedsContext)) return e;
  if (!p || (flags & ~0x7u)) return c.ret(cuda::kErrorInvalidValue);
  if (size == 0) {
    *p = nullptr;
    return 0;
  }
  void* mem = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) return c.ret(cuda::kErrorMemoryAllocation);
  c.s.pinned[reinterpret_cast<uptr>(mem)] = Pinned{reinterpret_cast<uptr>(mem), size, c.device(), flags};
  *p = mem;
  return 0;
}

STANDIN_EXPORT Error cudaFreeHost(void* p) {
  Call c("cudaFreeHost");
  if (Error e = c.begin(kNeedsContext)) return e;
  if (!p) return 0;
  auto it = c.s.pinned.find(reinterpret_cast<uptr>(p));
  if (it == c.s.pinned.end()) return c.ret(cuda::kErrorInvalidValue);
  // Implicit synchronisation: whatever still reads or writes the buffer runs first.
  Error e = complete_all(c.s);
  ::munmap(p, it->second.size);
  c.s.pinned.erase(it);
  return c.ret(e);
}

STANDIN_EXPORT Error cudaDeviceCanAccessPeer(int* can, int device, int peer) {
  Call c("cudaDeviceCanAccessPeer");
  if (Error e = c.begin(0)) return e;
  if (!can) return c.ret(cuda::kErrorInvalidValue);
  if (!valid_device(c.s, device) || !valid_device(c.s, peer)) return c.ret(cuda::kErrorInvalidDevice);
  *can = device != peer && c.s.config.peer_access ? 1 : 0;
  return 0;
}

STANDIN_EXPORT Error cudaDeviceEnablePeerAccess(int peer, unsigned flags) {
  Call c("cudaDeviceEnablePeerAccess");
  if (Error e = c.begin(kNeedsContext)) return e;
  if (flags != 0) return c.ret(cuda::kErrorInvalidValue);
  if (!valid_device(c.s, peer) || peer == c.device()) return c.ret(cuda::kErrorInvalidDevice);
  if (!c.s.config.peer_access) return c.ret(kErrorPeerAccessUnsupported);
  Device& d = c.s.devices[static_cast<std::size_t>(c.device())];
  if (d.peer_enabled[static_cast<std::size_t>(peer)]) return c.ret(cuda::kErrorPeerAccessAlreadyEnabled);
  // Mapping the peer's memory needs the peer's primary context (cuCtxEnablePeerAccess takes it).
  create_context(c.s, peer);
  d.peer_enabled[static_cast<std::size_t>(peer)] = true;
  return 0;
}

STANDIN_EXPORT Error cudaPointerGetAttributes(cuda::PointerAttributes* attributes, const void* p) {
  Call c("cudaPointerGetAttributes");
  if (Error e = c.begin(kNeedsContext)) return e;
  if (!attributes) return c.ret(cuda::kErrorInvalidValue);
  cuda::PointerAttributes out;
  std::memset(&out, 0, sizeof out);
  const uptr at = reinterpret_cast<uptr>(p);
  if (const Allocation* a = allocation_containing(c.s, at)) {
    out.type = cuda::kMemoryTypeDevice;
    out.device = a->device;
    out.devicePointer = const_cast<void*>(p);
  } else if (const Pinned* b = pinned_containing(c.s, at)) {
    out.type = cuda::kMemoryTypeHost;
    out.device = b->device;
    out.devicePointer = out.hostPointer = const_cast<void*>(p);
  } else {
    out.type = cuda::kMemoryTypeUnregistered;  // CUDA 11+: success, not cudaErrorInvalidValue
    out.device = -2;                            // cudaInvalidDeviceId
  }
  std::memcpy(attributes, &out, sizeof out);
  // A later runtime's larger structure: the caller must have left room for it.
  std::memset(reinterpret_cast<unsigned char*>(attributes) + sizeof out, 0,
              static_cast<std::size_t>(c.s.config.attributes_bytes - sizeof out));
  return 0;
}

STANDIN_EXPORT const char* cudaGetErrorName(Error error) {
  Call c("cudaGetErrorName");
  const ErrorText* t = error_text(error);
  return t ? t->name : "unrecognized error code";
}

STANDIN_EXPORT const char* cudaGetErrorString(Error error) {
  Call c("cudaGetErrorString");
  const ErrorText* t = error_text(error);
  return t ? t->text : "unrecognized error code";
}

STANDIN_EXPORT Error cudaGetLastError() {
  Call c("cudaGetLastError");
  if (!c.s.init_error.empty()) return cuda::kErrorInitializationError;
  if (c.s.config.driver < c.s.config.runtime) return cuda::kErrorInsufficientDriver;
  if (!c.s.config.nodevice) {
    const Device& d = c.s.devices[static_cast<std::size_t>(c.device())];
    if (d.sticky) return d.sticky;  // sticky: returned, never cleared
  }
  Error last = c.t->last;
  c.t->last = 0;
  return last;
}

// Driver API (CUresult values: 0 success, 1 invalid value, 3 not initialised, 100 no device,
// 101 invalid device).
STANDIN_EXPORT int cuInit(unsigned flags) {
  Call c("cuInit");
  if (c.injected) return c.injected;
  if (!c.s.init_error.empty()) return 3;
  if (flags != 0) return 1;
  if (c.s.config.nodevice) return 100;
  c.s.driver_initialised = true;
  return 0;
}

STANDIN_EXPORT int cuDeviceGet(int* device, int ordinal) {
  Call c("cuDeviceGet");
  if (c.injected) return c.injected;
  if (!c.s.driver_initialised) return 3;
  if (!device) return 1;
  if (!valid_device(c.s, ordinal)) return 101;
  *device = ordinal;
  return 0;
}

STANDIN_EXPORT int cuDevicePrimaryCtxGetState(int device, unsigned* flags, int* active) {
  Call c("cuDevicePrimaryCtxGetState");
  if (c.injected) return c.injected;
  if (!c.s.driver_initialised) return 3;
  if (!flags || !active) return 1;
  if (!valid_device(c.s, device)) return 101;
  *flags = 0;
  *active = c.s.devices[static_cast<std::size_t>(device)].active ? 1 : 0;
  return 0;
}
