// standin.h - tests' access to the CUDA runtime stand-in (tests/cudart_standin): its control API
// and the CUDA entry points, resolved through the dlopen handle maploc's own dlopen of the same
// path returns. Tests get MAPLOC_STANDIN_PATH as a compile definition. See docs/cuda-standin.md.
#pragma once

#include "cuda_api.h"

#include <dlfcn.h>

#include <cstddef>
#include <stdexcept>
#include <string>

namespace maploc::standin {

// The control API, as function-pointer types (the library's C names are maploc_standin_<name>).
using ConfigureFn = int (*)(const char* spec);
using LastMessageFn = const char* (*)();
using ContextsCreatedFn = int (*)(int device);
using ContextActiveFn = int (*)(int device);
using DeviceBytesFn = int (*)(const void* device_ptr, void* out, std::size_t n);
using WriteDeviceFn = int (*)(void* device_ptr, const void* src, std::size_t n);
using ProtectFn = int (*)(const void* device_ptr, std::size_t n);
using ViolationsFn = std::size_t (*)();
using ViolationTextFn = const char* (*)(std::size_t i);
using AcknowledgeViolationsFn = void (*)();
using SpinningWaitsFn = unsigned long long (*)();
using NowNsFn = unsigned long long (*)();
using EngineStatFn = unsigned long long (*)(int device, int dir);  // dir 0 h2d (and peer in), 1 d2h, 2 d2d
using ResetClockStatsFn = void (*)();
using EnqueueFillFn = int (*)(void* device_ptr, int value, std::size_t n, void* stream,
                              unsigned long long duration_ns);
using SynchronizeAllFn = int (*)();
using FailFn = int (*)(const char* entry_point, int nth, int error);
using CallsFn = unsigned long long (*)(const char* entry_point);
using LiveFn = long long (*)(const char* what);

struct Control {
  void* handle = nullptr;

  ConfigureFn configure = nullptr;
  LastMessageFn last_message = nullptr;
  ContextsCreatedFn contexts_created = nullptr;
  ContextActiveFn context_active = nullptr;
  DeviceBytesFn device_bytes = nullptr;
  WriteDeviceFn write_device = nullptr;
  ProtectFn protect = nullptr;
  ViolationsFn violations = nullptr;
  ViolationTextFn violation_text = nullptr;
  AcknowledgeViolationsFn acknowledge_violations = nullptr;
  SpinningWaitsFn spinning_waits = nullptr;
  NowNsFn now_ns = nullptr;
  EngineStatFn engine_busy_ns = nullptr;
  EngineStatFn engine_first_start_ns = nullptr;
  EngineStatFn engine_last_end_ns = nullptr;
  ResetClockStatsFn reset_clock_stats = nullptr;
  EnqueueFillFn enqueue_fill = nullptr;
  SynchronizeAllFn synchronize_all = nullptr;
  FailFn fail = nullptr;
  CallsFn calls = nullptr;
  LiveFn live = nullptr;

  // The CUDA entry points, for tests that play maploc's caller.
  remap::cuda::RuntimeGetVersionFn cudaRuntimeGetVersion = nullptr;
  remap::cuda::DriverGetVersionFn cudaDriverGetVersion = nullptr;
  remap::cuda::GetDeviceCountFn cudaGetDeviceCount = nullptr;
  remap::cuda::GetDeviceFn cudaGetDevice = nullptr;
  remap::cuda::SetDeviceFn cudaSetDevice = nullptr;
  remap::cuda::MemGetInfoFn cudaMemGetInfo = nullptr;
  remap::cuda::MallocFn cudaMalloc = nullptr;
  remap::cuda::FreeFn cudaFree = nullptr;
  remap::cuda::HostAllocFn cudaHostAlloc = nullptr;
  remap::cuda::FreeHostFn cudaFreeHost = nullptr;
  remap::cuda::StreamCreateWithFlagsFn cudaStreamCreateWithFlags = nullptr;
  remap::cuda::StreamDestroyFn cudaStreamDestroy = nullptr;
  remap::cuda::StreamSynchronizeFn cudaStreamSynchronize = nullptr;
  remap::cuda::StreamWaitEventFn cudaStreamWaitEvent = nullptr;
  remap::cuda::EventCreateWithFlagsFn cudaEventCreateWithFlags = nullptr;
  remap::cuda::EventDestroyFn cudaEventDestroy = nullptr;
  remap::cuda::EventRecordFn cudaEventRecord = nullptr;
  remap::cuda::EventSynchronizeFn cudaEventSynchronize = nullptr;
  remap::cuda::MemcpyAsyncFn cudaMemcpyAsync = nullptr;
  remap::cuda::MemcpyPeerAsyncFn cudaMemcpyPeerAsync = nullptr;
  remap::cuda::DeviceCanAccessPeerFn cudaDeviceCanAccessPeer = nullptr;
  remap::cuda::DeviceEnablePeerAccessFn cudaDeviceEnablePeerAccess = nullptr;
  remap::cuda::PointerGetAttributesFn cudaPointerGetAttributes = nullptr;
  remap::cuda::GetErrorNameFn cudaGetErrorName = nullptr;
  remap::cuda::GetErrorStringFn cudaGetErrorString = nullptr;
  remap::cuda::GetLastErrorFn cudaGetLastError = nullptr;
  remap::cuda::CuInitFn cuInit = nullptr;
  remap::cuda::CuDeviceGetFn cuDeviceGet = nullptr;
  remap::cuda::CuDevicePrimaryCtxGetStateFn cuDevicePrimaryCtxGetState = nullptr;

  static const char* path() { return MAPLOC_STANDIN_PATH; }

  static Control& get() {
    static Control control = load();
    return control;
  }

 private:
  template <typename Fn>
  void resolve(Fn& fn, const char* name) {
    fn = reinterpret_cast<Fn>(::dlsym(handle, name));
    if (!fn) throw std::runtime_error(std::string("cudart stand-in: missing symbol ") + name);
  }

  static Control load() {
    Control c;
    c.handle = ::dlopen(MAPLOC_STANDIN_PATH, RTLD_NOW | RTLD_LOCAL);
    if (!c.handle) throw std::runtime_error(std::string("cudart stand-in: dlopen: ") + ::dlerror());
#define MAPLOC_STANDIN_CONTROL(field) c.resolve(c.field, "maploc_standin_" #field)
    MAPLOC_STANDIN_CONTROL(configure);
    MAPLOC_STANDIN_CONTROL(last_message);
    MAPLOC_STANDIN_CONTROL(contexts_created);
    MAPLOC_STANDIN_CONTROL(context_active);
    MAPLOC_STANDIN_CONTROL(device_bytes);
    MAPLOC_STANDIN_CONTROL(write_device);
    MAPLOC_STANDIN_CONTROL(protect);
    MAPLOC_STANDIN_CONTROL(violations);
    MAPLOC_STANDIN_CONTROL(violation_text);
    MAPLOC_STANDIN_CONTROL(acknowledge_violations);
    MAPLOC_STANDIN_CONTROL(spinning_waits);
    MAPLOC_STANDIN_CONTROL(now_ns);
    MAPLOC_STANDIN_CONTROL(engine_busy_ns);
    MAPLOC_STANDIN_CONTROL(engine_first_start_ns);
    MAPLOC_STANDIN_CONTROL(engine_last_end_ns);
    MAPLOC_STANDIN_CONTROL(reset_clock_stats);
    MAPLOC_STANDIN_CONTROL(enqueue_fill);
    MAPLOC_STANDIN_CONTROL(synchronize_all);
    MAPLOC_STANDIN_CONTROL(fail);
    MAPLOC_STANDIN_CONTROL(calls);
    MAPLOC_STANDIN_CONTROL(live);
#undef MAPLOC_STANDIN_CONTROL
#define MAPLOC_STANDIN_CUDA(name) c.resolve(c.name, #name)
    MAPLOC_STANDIN_CUDA(cudaRuntimeGetVersion);
    MAPLOC_STANDIN_CUDA(cudaDriverGetVersion);
    MAPLOC_STANDIN_CUDA(cudaGetDeviceCount);
    MAPLOC_STANDIN_CUDA(cudaGetDevice);
    MAPLOC_STANDIN_CUDA(cudaSetDevice);
    MAPLOC_STANDIN_CUDA(cudaMemGetInfo);
    MAPLOC_STANDIN_CUDA(cudaMalloc);
    MAPLOC_STANDIN_CUDA(cudaFree);
    MAPLOC_STANDIN_CUDA(cudaHostAlloc);
    MAPLOC_STANDIN_CUDA(cudaFreeHost);
    MAPLOC_STANDIN_CUDA(cudaStreamCreateWithFlags);
    MAPLOC_STANDIN_CUDA(cudaStreamDestroy);
    MAPLOC_STANDIN_CUDA(cudaStreamSynchronize);
    MAPLOC_STANDIN_CUDA(cudaStreamWaitEvent);
    MAPLOC_STANDIN_CUDA(cudaEventCreateWithFlags);
    MAPLOC_STANDIN_CUDA(cudaEventDestroy);
    MAPLOC_STANDIN_CUDA(cudaEventRecord);
    MAPLOC_STANDIN_CUDA(cudaEventSynchronize);
    MAPLOC_STANDIN_CUDA(cudaMemcpyAsync);
    MAPLOC_STANDIN_CUDA(cudaMemcpyPeerAsync);
    MAPLOC_STANDIN_CUDA(cudaDeviceCanAccessPeer);
    MAPLOC_STANDIN_CUDA(cudaDeviceEnablePeerAccess);
    MAPLOC_STANDIN_CUDA(cudaPointerGetAttributes);
    MAPLOC_STANDIN_CUDA(cudaGetErrorName);
    MAPLOC_STANDIN_CUDA(cudaGetErrorString);
    MAPLOC_STANDIN_CUDA(cudaGetLastError);
    MAPLOC_STANDIN_CUDA(cuInit);
    MAPLOC_STANDIN_CUDA(cuDeviceGet);
    MAPLOC_STANDIN_CUDA(cuDevicePrimaryCtxGetState);
#undef MAPLOC_STANDIN_CUDA
    return c;
  }
};

}  // namespace maploc::standin
