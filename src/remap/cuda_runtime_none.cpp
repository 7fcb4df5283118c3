// cuda_runtime_none.cpp - the CUDA queries of a build without CUDA: no device, ever.
#include "remap/cuda_runtime.h"

namespace maploc::remap::detail {

bool cuda_built() { return false; }
int cuda_device_count() { return 0; }

}  // namespace maploc::remap::detail
