// device_memory.cpp - device and pinned allocations owned by shared pointers, downloads, and
// device-to-device copies, all through the DeviceBackend.
#include <algorithm>
#include <vector>

#include "maploc/error.h"
#include "upload.h"

namespace maploc::remap::detail {
namespace {

// The status both backends give for "out of memory" (cudaErrorMemoryAllocation).
constexpr DeviceBackend::Status kStatusOutOfMemory = 2;

// A stream on one device, synchronised (errors ignored: this is the failure
// path's cleanup) and destroyed when it goes.
class ScopedStream {
 public:
  ScopedStream(DeviceBackend& backend, int device, const std::string& who, const CudaOptions& options)
      : backend_(backend) {
    check_device(backend, backend.set_device(device), "selecting cuda:" + std::to_string(device) + " for " + who);
    check_device(backend, backend.stream_create(&stream_), "creating a stream on cuda:" + std::to_string(device));
    order_after_caller(backend, device, stream_, options);
  }
  ~ScopedStream() {
    if (stream_ == nullptr) return;
    backend_.stream_sync(stream_);
    backend_.stream_destroy(stream_);
  }
  ScopedStream(const ScopedStream&) = delete;
  ScopedStream& operator=(const ScopedStream&) = delete;
  DeviceBackend::Stream get() const { return stream_; }

 private:
  DeviceBackend& backend_;
  DeviceBackend::Stream stream_ = nullptr;
};

}  // namespace

void order_after_caller(DeviceBackend& backend, int device, DeviceBackend::Stream stream, const CudaOptions& options) {
  const std::string where = "cuda:" + std::to_string(device);
  DeviceBackend::Stream caller = nullptr;  // the legacy default stream
  for (const auto& c : options.streams) {
    if (c.device == device) caller = c.stream;
  }
  check_device(backend, backend.set_device(device), "selecting " + where);
  DeviceBackend::Event e = nullptr;
  check_device(backend, backend.event_create(&e), "creating an ordering event on " + where);
  // Destroying an event whose wait is queued is allowed: CUDA releases it when the wait is done.
  const auto recorded = backend.event_record(e, caller);
  const auto waited = recorded == 0 ? backend.stream_wait_event(stream, e) : recorded;
  backend.event_destroy(e);
  check_device(backend, waited,
               "ordering maploc's copies on " + where + " after the caller's " +
                   (caller == nullptr ? std::string("default stream") : std::string("stream")));
}

void check_device(DeviceBackend& backend, DeviceBackend::Status status, const std::string& what) {
  if (status == 0) return;
  throw Error(status == kStatusOutOfMemory ? ErrorCode::kRemapOutOfMemory : ErrorCode::kRemapDevice, Stage::kRemap,
              what + " failed: " + backend.error_text(status));
}

std::shared_ptr<void> device_allocate(const std::shared_ptr<DeviceBackend>& backend, int device, std::uint64_t n,
                                      void** out, const std::string& who) {
  *out = nullptr;
  if (!backend) {
    throw Error(ErrorCode::kRemapCudaUnavailable, Stage::kRemap,
                who + " must go to cuda:" + std::to_string(device) + " but no device runtime is available");
  }
  if (n == 0) return nullptr;
  const std::string where = "cuda:" + std::to_string(device);
  check_device(*backend, backend->set_device(device), "selecting " + where + " for " + who);
  void* p = nullptr;
  check_device(*backend, backend->device_alloc(&p, n),
               "allocating " + std::to_string(n) + " bytes on " + where + " for " + who);
  *out = p;
  // cudaFree needs no current device: the pointer says where it lives.
  return std::shared_ptr<void>(p, [backend](void* q) { backend->device_free(q); });
}

std::shared_ptr<void> pinned_allocate(const std::shared_ptr<DeviceBackend>& backend, std::uint64_t n, void** out,
                                      const std::string& who) {
  if (!backend) {
    throw Error(ErrorCode::kRemapCudaUnavailable, Stage::kRemap,
                "pinned host memory for " + who + " needs a device runtime, and none is available");
  }
  void* p = nullptr;
  check_device(*backend, backend->pinned_alloc(&p, std::max<std::uint64_t>(n, 1)),
               "allocating " + std::to_string(n) + " pinned host bytes for " + who);
  *out = p;
  return std::shared_ptr<void>(p, [backend](void* q) { backend->pinned_free(q); });
}

void device_download(DeviceBackend& backend, int device, const void* src, void* dst, std::uint64_t n,
                     const std::string& who, const CudaOptions& options) {
  const DownloadJob job{src, device, static_cast<std::uint8_t*>(dst), n, who};
  download(backend, std::span(&job, 1), options);
}

void device_copy(DeviceBackend& backend, std::span<const PeerCopy> copies, const CudaOptions& options) {
  const DeviceGuard guard(&backend);
  std::vector<int> devices;
  for (const auto& c : copies) {
    if (std::find(devices.begin(), devices.end(), c.dst_device) == devices.end()) devices.push_back(c.dst_device);
  }
  // One stream per destination device; the streams of all devices run at once.
  std::vector<std::unique_ptr<ScopedStream>> streams;
  // Each stream waits for the caller's work on its own device; copies from another device also
  // wait for the caller's work there (a kernel still writing the source).
  std::vector<int> sources;
  for (const auto& c : copies) {
    if (std::find(sources.begin(), sources.end(), c.src_device) == sources.end()) sources.push_back(c.src_device);
  }
  for (int d : devices) {
    streams.push_back(std::make_unique<ScopedStream>(backend, d, "a device-to-device copy", options));
    for (int src : sources) {
      if (src != d) order_after_caller(backend, src, streams.back()->get(), options);
    }
  }
  auto stream_of = [&](int d) {
    return streams[static_cast<std::size_t>(std::find(devices.begin(), devices.end(), d) - devices.begin())]->get();
  };
  for (const auto& c : copies) {
    if (c.n == 0) continue;
    const std::string what = "copying " + c.who + " from cuda:" + std::to_string(c.src_device) + " to cuda:" +
                             std::to_string(c.dst_device);
    check_device(backend, backend.set_device(c.dst_device), what);
    const auto status =
        c.src_device == c.dst_device
            ? backend.copy_async(c.dst, c.src, c.n, DeviceBackend::CopyKind::kDeviceToDevice, stream_of(c.dst_device))
            : backend.copy_peer_async(c.dst, c.dst_device, c.src, c.src_device, c.n, stream_of(c.dst_device));
    check_device(backend, status, what);
  }
  for (std::size_t k = 0; k < devices.size(); ++k) {
    check_device(backend, backend.stream_sync(streams[k]->get()),
                 "copying " + std::to_string(copies.size()) + " storage(s) to cuda:" + std::to_string(devices[k]));
  }
}

}  // namespace maploc::remap::detail
