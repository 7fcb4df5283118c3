// cuda_runtime.h - the few CUDA runtime facts the rest of remap needs, with or without CUDA (internal).
#pragma once

namespace maploc::remap::detail {

/// True when this build links the CUDA runtime.
bool cuda_built();
/// Devices the CUDA runtime reports; 0 without CUDA or on any runtime error
/// (no driver answers cudaErrorInsufficientDriver, 35).
int cuda_device_count();

}  // namespace maploc::remap::detail
