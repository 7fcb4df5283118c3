// cuda_api.h - the part of the CUDA runtime (and three driver calls) that maploc uses, declared
// here from NVIDIA's documented API so that the adapter builds on any machine, with no toolkit
// installed. tests/remap/cuda_api_check.cpp compiles these against the real cuda_runtime_api.h
// wherever the toolkit is present and fails on any difference of value, size or signature.
// The CUDA runtime stand-in (tests/cudart_standin) implements exactly these.
#pragma once

#include <cstddef>

namespace maploc::remap::cuda {

// cudaError_t: an enum in the toolkit, passed as int.
using Error = int;
inline constexpr Error kSuccess = 0;
inline constexpr Error kErrorInvalidValue = 1;
inline constexpr Error kErrorMemoryAllocation = 2;
inline constexpr Error kErrorInitializationError = 3;
inline constexpr Error kErrorInsufficientDriver = 35;
inline constexpr Error kErrorNoDevice = 100;
inline constexpr Error kErrorInvalidDevice = 101;
inline constexpr Error kErrorInvalidResourceHandle = 400;
inline constexpr Error kErrorNotReady = 600;
inline constexpr Error kErrorIllegalAddress = 700;
inline constexpr Error kErrorPeerAccessAlreadyEnabled = 704;
inline constexpr Error kErrorLaunchFailure = 719;

// Opaque handles (CUstream_st*, CUevent_st*), and the special stream handles of driver_types.h.
using Stream = struct StreamHandle*;
using Event = struct EventHandle*;
inline Stream legacy_stream() { return reinterpret_cast<Stream>(0x1); }  // cudaStreamLegacy

// cudaMemcpyKind
inline constexpr int kMemcpyHostToDevice = 1;
inline constexpr int kMemcpyDeviceToHost = 2;
inline constexpr int kMemcpyDeviceToDevice = 3;

// Flags.
inline constexpr unsigned kHostAllocPortable = 0x01;  // cudaHostAllocPortable
inline constexpr unsigned kStreamDefault = 0x00;      // cudaStreamDefault
inline constexpr unsigned kStreamNonBlocking = 0x01;  // cudaStreamNonBlocking
inline constexpr unsigned kEventBlockingSync = 0x01;  // cudaEventBlockingSync
inline constexpr unsigned kEventDisableTiming = 0x02; // cudaEventDisableTiming

// cudaMemoryType
inline constexpr int kMemoryTypeUnregistered = 0;
inline constexpr int kMemoryTypeHost = 1;
inline constexpr int kMemoryTypeDevice = 2;
inline constexpr int kMemoryTypeManaged = 3;

// cudaPointerAttributes as CUDA 12 and 13 declare it (CUDA 11's lacked `reserved`). The runtime
// writes the layout of its own version: callers pass PointerAttributesRoom, which leaves room
// for a later runtime's larger structure.
struct PointerAttributes {
  int type;  // enum cudaMemoryType
  int device;
  void* devicePointer;
  void* hostPointer;
  long reserved[8];
};
union PointerAttributesRoom {
  PointerAttributes attributes;
  unsigned char room[512];
};

// The runtime entry points, by their C names.
using RuntimeGetVersionFn = Error (*)(int* version);
using DriverGetVersionFn = Error (*)(int* version);
using GetDeviceCountFn = Error (*)(int* count);
using GetDeviceFn = Error (*)(int* device);
using SetDeviceFn = Error (*)(int device);
using MemGetInfoFn = Error (*)(std::size_t* free, std::size_t* total);
using MallocFn = Error (*)(void** p, std::size_t size);
using FreeFn = Error (*)(void* p);
using HostAllocFn = Error (*)(void** p, std::size_t size, unsigned flags);
using FreeHostFn = Error (*)(void* p);
using StreamCreateWithFlagsFn = Error (*)(Stream* stream, unsigned flags);
using StreamDestroyFn = Error (*)(Stream stream);
using StreamSynchronizeFn = Error (*)(Stream stream);
using StreamWaitEventFn = Error (*)(Stream stream, Event event, unsigned flags);
using EventCreateWithFlagsFn = Error (*)(Event* event, unsigned flags);
using EventDestroyFn = Error (*)(Event event);
using EventRecordFn = Error (*)(Event event, Stream stream);
using EventSynchronizeFn = Error (*)(Event event);
using MemcpyAsyncFn = Error (*)(void* dst, const void* src, std::size_t count, int kind, Stream stream);
using MemcpyPeerAsyncFn = Error (*)(void* dst, int dst_device, const void* src, int src_device, std::size_t count,
                                    Stream stream);
using DeviceCanAccessPeerFn = Error (*)(int* can, int device, int peer);
using DeviceEnablePeerAccessFn = Error (*)(int peer, unsigned flags);
using PointerGetAttributesFn = Error (*)(PointerAttributes* attributes, const void* p);
using GetErrorNameFn = const char* (*)(Error error);
using GetErrorStringFn = const char* (*)(Error error);
using GetLastErrorFn = Error (*)();

// The driver API calls the device guard uses to learn whether a device already has a primary
// context (CUresult, CUdevice are ints): libcuda.so.1, or the stand-in.
using CuInitFn = int (*)(unsigned flags);
using CuDeviceGetFn = int (*)(int* device, int ordinal);
using CuDevicePrimaryCtxGetStateFn = int (*)(int device, unsigned* flags, int* active);

}  // namespace maploc::remap::cuda
