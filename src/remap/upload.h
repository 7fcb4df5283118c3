// upload.h - device memory through the DeviceBackend: allocations owned by shared pointers, and the
// pipeline that fills device memory from the file through a reused pinned staging ring (internal).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "maploc/bytes.h"
#include "maploc/remap/loaded.h"
#include "device_backend.h"
#include "support/progress_meter.h"

namespace maploc::remap::detail {

/// n bytes of device memory on `device`; the owner frees it. Changes the
/// current device (callers hold a DeviceGuard). Raises kRemapOutOfMemory when
/// the device is full, kRemapDevice otherwise, naming `who`.
std::shared_ptr<void> device_allocate(const std::shared_ptr<DeviceBackend>& backend, int device, std::uint64_t n,
                                      void** out, const std::string& who);
/// n bytes of page-locked host memory; the owner frees it. Raises as device_allocate.
std::shared_ptr<void> pinned_allocate(const std::shared_ptr<DeviceBackend>& backend, std::uint64_t n, void** out,
                                      const std::string& who);
/// One storage (or part) to bring back from a device.
struct DownloadJob {
  const void* src = nullptr;  ///< device memory on `device`
  int device = 0;
  std::uint8_t* dst = nullptr;  ///< host memory (any kind)
  std::uint64_t n = 0;
  std::string who;
};
/// Copies every job's device memory to its host destination through the
/// backend's pinned staging ring (DMA at full speed into page-locked memory,
/// then a memcpy out while the next buffers copy), one stream per device,
/// after the caller's work (order_after_caller); returns when all is there.
void download(DeviceBackend& backend, std::span<const DownloadJob> jobs, const CudaOptions& options);

/// download() of one job.
void device_download(DeviceBackend& backend, int device, const void* src, void* dst, std::uint64_t n,
                     const std::string& who, const CudaOptions& options);

/// One device-to-device copy for device_copy().
struct PeerCopy {
  void* dst = nullptr;
  int dst_device = 0;
  const void* src = nullptr;
  int src_device = 0;
  std::uint64_t n = 0;
  std::string who;
};
/// Copies device memory to device memory, never through the host (peer
/// copies between devices), one stream per destination device, and waits.
void device_copy(DeviceBackend& backend, std::span<const PeerCopy> copies, const CudaOptions& options);

/// One storage to upload.
struct UploadJob {
  Bytes source;                   ///< its bytes as on disk (a view of the mapping, or inflated)
  std::int64_t file_offset = -1;  ///< where source lies in the file behind upload()'s fd; -1: copy source
  std::size_t swap_unit = 1;      ///< element size to byte-swap, 1 for none
  void* dst = nullptr;            ///< device memory on `device`
  int device = 0;
  std::string who;  ///< "storage '3' of tensor 'fc.weight'"
  /// Instead of `source`: produces bytes [offset, offset + n) of the job (of `read_size` in all)
  /// straight into staging, on a reader thread (rank slices gathered from their rows); `swap_unit`
  /// still applies. Raises maploc::Error.
  std::function<void(std::uint64_t offset, std::uint64_t n, std::uint8_t* out)> read{};
  std::uint64_t read_size = 0;

  std::uint64_t size() const { return read ? read_size : source.size(); }
};

/// Test hooks: ways to break the pipeline on purpose, so that a test can
/// show the simulator catches them.
struct UploadHooks {
  bool refill_before_copy_done = false;  ///< reuse a staging buffer without waiting for its event
  bool coalesce_anywhere = false;        ///< send gaps between any destinations (as before issue 26)
};

/// What lies between upload destinations. Only maploc's own arena (load())
/// may have its gaps overwritten: elsewhere (to(), load_into, slices) a gap
/// is memory of someone else's, or another allocation.
enum class Destinations : std::uint8_t { kSeparate, kOwnArena };

/// Makes `stream` (of any device) wait for the work queued so far on the
/// caller's stream of `device` (options.streams; the legacy default stream
/// where none is given), so maploc's copies land after a fill or kernel the
/// caller enqueued before calling. Selects `device`.
void order_after_caller(DeviceBackend& backend, int device, DeviceBackend::Stream stream, const CudaOptions& options);

/// Fills every job's device memory: reader threads (options.reader_threads,
/// alive for the whole upload) pread the file (or copy inflated/in-memory
/// sources) into the backend's reused ring of pinned staging buffers,
/// byte-swapping there, while the copy engine drains the buffers filled
/// before; small jobs share a buffer, and in maploc's own arena neighbouring
/// destinations share one transfer. Batches of different devices are
/// interleaved, so several devices fill at once. Copies are ordered after the
/// caller's stream (order_after_caller). Returns after every copy
/// completed. On failure everything the upload made is gone (the caller owns
/// the destinations) and the error names the storage: kIoRead for the file,
/// kRemapDevice for the runtime (a failed background copy names a storage of
/// the batch it failed in).
void upload(DeviceBackend& backend, std::span<const UploadJob> jobs, int fd, const CudaOptions& options,
            Destinations destinations, maploc::detail::ProgressMeter* meter = nullptr, const UploadHooks& hooks = {});

}  // namespace maploc::remap::detail
