// cuda_api_check.cpp - src/remap/cuda_api.h against the toolkit's own cuda_runtime_api.h and cuda.h:
// every value, structure layout and entry-point signature maploc declares itself must be the
// toolkit's, with the toolkit's types replaced by their ABI equivalents. Compiled only where the
// toolkit is installed; a mismatch is a compile error.
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdio>
#include <type_traits>

#include "cuda_api.h"

namespace cuda = maploc::remap::cuda;

// The toolkit's type, spelt as cuda_api.h spells it at the ABI level.
template <class T> struct Abi { using type = T; };
template <> struct Abi<cudaError_t> { using type = cuda::Error; };
template <> struct Abi<CUresult> { using type = int; };
template <> struct Abi<cudaMemcpyKind> { using type = int; };
template <> struct Abi<cudaStream_t> { using type = cuda::Stream; };
template <> struct Abi<cudaEvent_t> { using type = cuda::Event; };
template <> struct Abi<CUdevice> { using type = int; };
template <> struct Abi<CUdevice*> { using type = int*; };
template <> struct Abi<cudaStream_t*> { using type = cuda::Stream*; };
template <> struct Abi<cudaEvent_t*> { using type = cuda::Event*; };
template <> struct Abi<cudaPointerAttributes*> { using type = cuda::PointerAttributes*; };
template <class R, class... A> struct Abi<R (*)(A...)> { using type = typename Abi<R>::type (*)(typename Abi<A>::type...); };
template <class F> using AbiOf = typename Abi<std::remove_cv_t<F>*>::type;

#define SAME(ours, theirs) static_assert(std::is_same_v<cuda::ours, AbiOf<decltype(theirs)>>, #theirs)
SAME(RuntimeGetVersionFn, cudaRuntimeGetVersion);
SAME(DriverGetVersionFn, cudaDriverGetVersion);
SAME(GetDeviceCountFn, cudaGetDeviceCount);
SAME(GetDeviceFn, cudaGetDevice);
SAME(SetDeviceFn, cudaSetDevice);
SAME(MemGetInfoFn, cudaMemGetInfo);
SAME(MallocFn, cudaMalloc);
SAME(FreeFn, cudaFree);
SAME(HostAllocFn, cudaHostAlloc);
SAME(FreeHostFn, cudaFreeHost);
SAME(StreamCreateWithFlagsFn, cudaStreamCreateWithFlags);
SAME(StreamDestroyFn, cudaStreamDestroy);
SAME(StreamSynchronizeFn, cudaStreamSynchronize);
SAME(StreamWaitEventFn, cudaStreamWaitEvent);
SAME(EventCreateWithFlagsFn, cudaEventCreateWithFlags);
SAME(EventDestroyFn, cudaEventDestroy);
SAME(EventRecordFn, cudaEventRecord);
SAME(EventSynchronizeFn, cudaEventSynchronize);
SAME(MemcpyAsyncFn, cudaMemcpyAsync);
SAME(MemcpyPeerAsyncFn, cudaMemcpyPeerAsync);
SAME(DeviceCanAccessPeerFn, cudaDeviceCanAccessPeer);
SAME(DeviceEnablePeerAccessFn, cudaDeviceEnablePeerAccess);
SAME(PointerGetAttributesFn, cudaPointerGetAttributes);
SAME(GetErrorNameFn, cudaGetErrorName);
SAME(GetErrorStringFn, cudaGetErrorString);
SAME(GetLastErrorFn, cudaGetLastError);
SAME(CuInitFn, cuInit);
SAME(CuDeviceGetFn, cuDeviceGet);
SAME(CuDevicePrimaryCtxGetStateFn, cuDevicePrimaryCtxGetState);
#undef SAME

// Enumerations are passed as int.
static_assert(sizeof(cudaError_t) == sizeof(int) && sizeof(cudaMemcpyKind) == sizeof(int) &&
              sizeof(cudaMemoryType) == sizeof(int) && sizeof(CUresult) == sizeof(int) && sizeof(CUdevice) == sizeof(int));

// Values.
static_assert(cuda::kSuccess == cudaSuccess && cuda::kErrorInvalidValue == cudaErrorInvalidValue &&
              cuda::kErrorMemoryAllocation == cudaErrorMemoryAllocation &&
              cuda::kErrorInitializationError == cudaErrorInitializationError &&
              cuda::kErrorInsufficientDriver == cudaErrorInsufficientDriver && cuda::kErrorNoDevice == cudaErrorNoDevice &&
              cuda::kErrorInvalidDevice == cudaErrorInvalidDevice &&
              cuda::kErrorInvalidResourceHandle == cudaErrorInvalidResourceHandle &&
              cuda::kErrorNotReady == cudaErrorNotReady && cuda::kErrorIllegalAddress == cudaErrorIllegalAddress &&
              cuda::kErrorPeerAccessAlreadyEnabled == cudaErrorPeerAccessAlreadyEnabled &&
              cuda::kErrorLaunchFailure == cudaErrorLaunchFailure);
static_assert(cuda::kMemcpyHostToDevice == cudaMemcpyHostToDevice && cuda::kMemcpyDeviceToHost == cudaMemcpyDeviceToHost &&
              cuda::kMemcpyDeviceToDevice == cudaMemcpyDeviceToDevice);
static_assert(cuda::kHostAllocPortable == cudaHostAllocPortable && cuda::kStreamDefault == cudaStreamDefault &&
              cuda::kStreamNonBlocking == cudaStreamNonBlocking && cuda::kEventBlockingSync == cudaEventBlockingSync &&
              cuda::kEventDisableTiming == cudaEventDisableTiming);
static_assert(cuda::kMemoryTypeUnregistered == cudaMemoryTypeUnregistered && cuda::kMemoryTypeHost == cudaMemoryTypeHost &&
              cuda::kMemoryTypeDevice == cudaMemoryTypeDevice && cuda::kMemoryTypeManaged == cudaMemoryTypeManaged);

// The structure maploc hands to cudaPointerGetAttributes: the toolkit's layout, inside room to spare.
static_assert(sizeof(cuda::PointerAttributes) == sizeof(cudaPointerAttributes));
static_assert(offsetof(cuda::PointerAttributes, type) == offsetof(cudaPointerAttributes, type));
static_assert(offsetof(cuda::PointerAttributes, device) == offsetof(cudaPointerAttributes, device));
static_assert(offsetof(cuda::PointerAttributes, devicePointer) == offsetof(cudaPointerAttributes, devicePointer));
static_assert(offsetof(cuda::PointerAttributes, hostPointer) == offsetof(cudaPointerAttributes, hostPointer));
static_assert(sizeof(cuda::PointerAttributesRoom) >= 4 * sizeof(cudaPointerAttributes));

int main() {
  // The special stream handle, a macro of a pointer cast: compared at run time.
  if (cuda::legacy_stream() != reinterpret_cast<cuda::Stream>(cudaStreamLegacy)) {
    std::puts("cudaStreamLegacy differs from cuda_api.h's legacy_stream()");
    return 1;
  }
  std::printf("cuda_api.h matches the toolkit's headers (CUDA %d)\n", CUDART_VERSION);
  return 0;
}
