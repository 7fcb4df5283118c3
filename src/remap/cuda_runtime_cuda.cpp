// cuda_runtime_cuda.cpp - CUDA runtime queries, compiled when maploc is built with CUDA.
#include <cuda_runtime_api.h>

#include "remap/cuda_runtime.h"

namespace maploc::remap::detail {

bool cuda_built() { return true; }

int cuda_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky error; any error means "no device"
    return 0;
  }
  return count;
}

}  // namespace maploc::remap::detail
