// cuda_backend.h - the CUDA side of placement, behind plain functions; a build without CUDA links an implementation that refuses with kRemapCudaNotBuilt (internal).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "maploc/bytes.h"
#include "maploc/remap/loaded.h"
#include "support/progress_meter.h"

namespace maploc::remap::detail {

/// True when this build links the CUDA runtime.
bool cuda_built();
/// Devices the CUDA runtime reports; 0 without CUDA or on any runtime error
/// (no driver answers cudaErrorInsufficientDriver, 35).
int cuda_device_count();
/// Free bytes on a device (cudaMemGetInfo); raises kRemapDevice.
std::uint64_t cuda_free_bytes(int device);

/// Device memory of nbytes on `device`; the returned owner frees it. `who`
/// names the storage in errors (kRemapDevice, kRemapCudaNotBuilt).
std::shared_ptr<void> cuda_allocate(int device, std::uint64_t nbytes, void** out, const std::string& who);
/// Page-locked host memory; the owner frees it.
std::shared_ptr<void> cuda_allocate_pinned(std::uint64_t nbytes, void** out, const std::string& who);

/// One storage to upload: its bytes as on disk, made native by swapping
/// `swap_unit`-byte elements, into `dst` on `device`.
struct UploadJob {
  Bytes source;
  std::size_t swap_unit = 1;
  void* dst = nullptr;
  int device = 0;
  std::string who;  ///< "storage '3' of tensor 'fc.weight'"
};

/// Fills every job's device memory through a ring of pinned staging buffers
/// with asynchronous copies, several reader threads, and small neighbouring
/// jobs packed into one transfer. Returns after the copies completed.
/// Raises kRemapDevice naming the storage; kRemapCudaNotBuilt without CUDA.
void cuda_upload(std::span<const UploadJob> jobs, const CudaOptions& options,
                 maploc::detail::ProgressMeter* meter = nullptr);

/// Synchronous device-to-host copy.
void cuda_download(int device, const void* src, void* dst, std::uint64_t nbytes, const std::string& who);

}  // namespace maploc::remap::detail
