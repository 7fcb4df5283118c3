// device_backend.h - the one interface remap places storages through: a device runtime's
// allocation, copies, streams and events (the CUDA runtime loaded at run time, or the simulator).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

namespace maploc::remap {
namespace detail {
class StagingCache;
}  // namespace detail

/// What placement needs from a device runtime, modelled on the CUDA runtime:
/// calls act on the calling thread's current device (set_device), return a
/// status (0 = success, any other value is the runtime's error code, see
/// error_text) and never throw. Copies on a stream run later, in stream
/// order; an event recorded on a stream completes when everything enqueued
/// before it has. Thread-safe.
class DeviceBackend {
 public:
  using Status = int;
  using Stream = void*;
  using Event = void*;
  enum class CopyKind : std::uint8_t { kHostToDevice, kDeviceToHost, kDeviceToDevice };
  enum class PointerKind : std::uint8_t { kHost, kPinnedHost, kDevice };
  struct PointerInfo {
    PointerKind kind = PointerKind::kHost;
    int device = -1;  ///< the device of device memory, -1 otherwise
  };

  virtual ~DeviceBackend() = default;
  DeviceBackend() = default;
  DeviceBackend(const DeviceBackend&) = delete;
  DeviceBackend& operator=(const DeviceBackend&) = delete;

  /// What this is, for messages: "CUDA runtime 13000 (libcudart.so.13)", "simulated device".
  virtual std::string name() const = 0;
  /// Devices present; 0 on any runtime error (no driver, no device).
  virtual int device_count() = 0;
  virtual Status get_device(int* device) = 0;
  /// Makes `device` current for the calling thread. With CUDA 12 and later this creates the
  /// device's primary context (about 0.3-0.5 GB of device memory) where none exists.
  virtual Status set_device(int device) = 0;
  /// Whether `device` already has its primary context (true where the runtime cannot tell).
  virtual Status context_active(int device, bool* active) = 0;
  /// Free and total memory of the current device.
  virtual Status mem_info(std::uint64_t* free, std::uint64_t* total) = 0;

  /// Device memory on the current device (n > 0).
  virtual Status device_alloc(void** p, std::uint64_t n) = 0;
  virtual Status device_free(void* p) = 0;
  /// Page-locked host memory usable by every device (n > 0).
  virtual Status pinned_alloc(void** p, std::uint64_t n) = 0;
  virtual Status pinned_free(void* p) = 0;

  /// A stream of the current device, not ordered against the default stream.
  virtual Status stream_create(Stream* s) = 0;
  virtual Status stream_destroy(Stream s) = 0;
  virtual Status stream_sync(Stream s) = 0;
  /// Work enqueued on s after this call waits until e's recorded work completed.
  virtual Status stream_wait_event(Stream s, Event e) = 0;
  /// An event of the current device (no timing).
  virtual Status event_create(Event* e) = 0;
  virtual Status event_destroy(Event e) = 0;
  /// Captures s's work so far (s null: the legacy default stream of the current device).
  virtual Status event_record(Event e, Stream s) = 0;
  /// Waits until the event's work completed; the error of that work if it failed.
  virtual Status event_sync(Event e) = 0;

  /// n bytes from src to dst on stream s (host memory pinned for a real overlap).
  virtual Status copy_async(void* dst, const void* src, std::uint64_t n, CopyKind kind, Stream s) = 0;
  /// Device-to-device between two devices (peer access where the devices allow it), on s.
  virtual Status copy_peer_async(void* dst, int dst_device, const void* src, int src_device, std::uint64_t n,
                                 Stream s) = 0;
  /// What kind of memory p points to.
  virtual Status pointer_info(const void* p, PointerInfo* info) = 0;
  /// "cudaErrorMemoryAllocation (out of memory)".
  virtual std::string error_text(Status status) = 0;

  /// The staging buffers loads through this backend reuse (remap's upload
  /// pipeline keeps them here between loads). Frees them now; a concrete
  /// backend calls this first in its destructor.
  void release_staging() {
    std::shared_ptr<void> dropped;
    {
      const std::lock_guard lock(staging_mutex_);
      dropped.swap(staging_);
    }
  }

 private:
  friend class detail::StagingCache;
  std::mutex staging_mutex_;
  std::shared_ptr<void> staging_;
};

namespace detail {

/// Restores the calling thread's current device on every path out of a scope
/// (torch's device guard): load, plan, to and load_into select devices. Like
/// PyTorch's MaybeExchangeDevice it never creates a context: where the saved
/// device has no primary context (the thread never used it), selecting it
/// again would create one (CUDA 12+), so the current device is left as the
/// scope set it (docs/cuda.md, "Streams, devices and contexts").
class DeviceGuard {
 public:
  explicit DeviceGuard(DeviceBackend* backend) {
    if (backend != nullptr && backend->device_count() > 0 && backend->get_device(&saved_) == 0) backend_ = backend;
  }
  ~DeviceGuard() {
    if (backend_ == nullptr) return;
    int now = saved_;
    if (backend_->get_device(&now) == 0 && now == saved_) return;
    bool active = true;
    if (backend_->context_active(saved_, &active) == 0 && !active) return;
    backend_->set_device(saved_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  DeviceBackend* backend_ = nullptr;
  int saved_ = 0;
};

/// Raises kRemapDevice "`what` failed: <error text>" unless status is 0.
void check_device(DeviceBackend& backend, DeviceBackend::Status status, const std::string& what);

/// The CUDA runtime of this process (libcudart loaded with dlopen on first
/// use, symbols resolved once), or null when maploc was built without CUDA
/// or no usable runtime library was found; then `why` says which library was
/// missing or too old and how to fix it.
std::shared_ptr<DeviceBackend> cuda_runtime(std::string* why);

/// The CUDA runtime from the first of `libraries` that loads and has every
/// symbol maploc needs (for tests of a missing or wrong library); null and
/// `why` otherwise.
std::shared_ptr<DeviceBackend> load_cuda_runtime(const std::string& libraries, std::string* why);

}  // namespace detail
}  // namespace maploc::remap
