// cuda_backend_cuda.cpp - CUDA placement: device allocations and the pinned-ring upload pipeline
// (loading-performance-and-security.md A.9, A.12).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

#include "maploc/error.h"
#include "remap/cuda_backend.h"
#include "support/byteswap.h"

namespace maploc::remap::detail {
namespace {

void check(cudaError_t rc, const std::string& what) {
  if (rc == cudaSuccess) return;
  cudaGetLastError();  // clear a sticky error so the next call is not blamed for it
  throw Error(ErrorCode::kRemapDevice, Stage::kRemap,
              what + " failed: " + cudaGetErrorName(rc) + " (" + cudaGetErrorString(rc) + ")");
}

// Largest piece of one storage copied with one host memcpy by one thread.
constexpr std::uint64_t kCopyOpBytes = std::uint64_t{1} << 20;
// Neighbouring arena storages closer than this are sent in one transfer.
constexpr std::uint64_t kMaxCoalesceGap = 4096;

// One host copy into a staging buffer: n bytes of a job's source, swapped.
struct CopyOp {
  std::uint64_t staging_off;
  const std::uint8_t* src;
  std::uint64_t n;
  std::size_t unit;
};

// One cudaMemcpyAsync out of a staging buffer.
struct Transfer {
  std::uint64_t staging_off;
  std::uint8_t* dst;
  std::uint64_t n;
  std::size_t job;  // first job in the transfer, for messages
};

// What one staging buffer carries.
struct Batch {
  std::vector<CopyOp> ops;
  std::vector<Transfer> transfers;
  std::uint64_t used = 0;
  std::uint64_t staged = 0;  // payload bytes (without coalescing gaps), for progress
};

// Packs the jobs of one device into staging-buffer batches. Large jobs are cut
// into buffer-sized pieces; small ones share a buffer. With `coalesce` (arena
// placement, where gaps between storages are only padding) neighbouring
// destinations become one transfer.
std::vector<Batch> pack(std::span<const UploadJob> jobs, const std::vector<std::size_t>& order,
                        std::uint64_t capacity, bool coalesce) {
  std::vector<Batch> batches(1);
  for (std::size_t j : order) {
    const UploadJob& job = jobs[j];
    const auto* dst = static_cast<std::uint8_t*>(job.dst);
    for (std::uint64_t done = 0; done < job.source.size();) {
      Batch* b = &batches.back();
      std::uint64_t gap = 0;
      bool extend = false;
      if (coalesce && !b->transfers.empty()) {
        const Transfer& last = b->transfers.back();
        const std::uint8_t* end = last.dst + last.n;
        if (dst + done >= end && static_cast<std::uint64_t>(dst + done - end) <= kMaxCoalesceGap &&
            b->used + static_cast<std::uint64_t>(dst + done - end) < capacity) {
          gap = static_cast<std::uint64_t>(dst + done - end);
          extend = true;
        }
      }
      std::uint64_t room = b->used + gap < capacity ? capacity - b->used - gap : 0;
      std::uint64_t n = std::min<std::uint64_t>(job.source.size() - done, room);
      n -= n % job.swap_unit;  // never split an element across buffers
      if (n == 0) {            // this buffer is full: start the next one
        batches.emplace_back();
        continue;
      }
      const std::uint64_t at = b->used + gap;
      for (std::uint64_t o = 0; o < n; o += kCopyOpBytes) {
        b->ops.push_back({at + o, job.source.data() + done + o, std::min(kCopyOpBytes, n - o), job.swap_unit});
      }
      if (extend) {
        b->transfers.back().n += gap + n;
      } else {
        b->transfers.push_back({at, const_cast<std::uint8_t*>(dst) + done, n, j});
      }
      b->used = at + n;
      b->staged += n;
      done += n;
    }
  }
  if (batches.back().transfers.empty()) batches.pop_back();
  return batches;
}

// The ring: pinned buffers with an event each, and a stream, on one device.
class Ring {
 public:
  Ring(int device, unsigned buffers, std::uint64_t bytes) : device_(device), bytes_(bytes) {
    check(cudaSetDevice(device), "selecting cuda:" + std::to_string(device));
    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "creating a copy stream");
    for (unsigned i = 0; i < buffers; ++i) {
      void* p = nullptr;
      check(cudaMallocHost(&p, bytes), "allocating a pinned staging buffer of " + std::to_string(bytes) + " bytes");
      buffers_.push_back(static_cast<std::uint8_t*>(p));
      cudaEvent_t e{};
      check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "creating a copy event");
      events_.push_back(e);
    }
  }
  ~Ring() {
    cudaSetDevice(device_);
    if (stream_ != nullptr) cudaStreamSynchronize(stream_);
    for (auto e : events_) cudaEventDestroy(e);
    for (auto* p : buffers_) cudaFreeHost(p);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  Ring(const Ring&) = delete;
  Ring& operator=(const Ring&) = delete;

  std::size_t size() const { return buffers_.size(); }
  std::uint8_t* buffer(std::size_t i) const { return buffers_[i]; }
  cudaEvent_t event(std::size_t i) const { return events_[i]; }
  cudaStream_t stream() const { return stream_; }
  std::uint64_t bytes() const { return bytes_; }

 private:
  int device_;
  std::uint64_t bytes_;
  cudaStream_t stream_ = nullptr;
  std::vector<std::uint8_t*> buffers_;
  std::vector<cudaEvent_t> events_;
};

// Host side of a batch: the copy ops spread over threads.
void fill(const Batch& batch, std::uint8_t* staging, unsigned threads) {
  const auto run = [&](std::atomic<std::size_t>& next) {
    for (std::size_t i; (i = next.fetch_add(1)) < batch.ops.size();) {
      const CopyOp& op = batch.ops[i];
      maploc::detail::copy_swapped(staging + op.staging_off, op.src, op.n, op.unit);
    }
  };
  std::atomic<std::size_t> next{0};
  const unsigned extra = batch.ops.size() > 1 ? static_cast<unsigned>(std::min<std::size_t>(threads, batch.ops.size())) - 1 : 0;
  std::vector<std::thread> pool;
  pool.reserve(extra);
  for (unsigned t = 0; t < extra; ++t) pool.emplace_back(run, std::ref(next));
  run(next);
  for (auto& t : pool) t.join();
}

void upload_device(std::span<const UploadJob> jobs, const std::vector<std::size_t>& order, int device,
                   const CudaOptions& options, maploc::detail::ProgressMeter* meter) {
  const std::uint64_t capacity = std::max<std::uint64_t>(options.staging_bytes - options.staging_bytes % 64, 64);
  const auto batches = pack(jobs, order, capacity, options.arena);
  if (batches.empty()) return;
  Ring ring(device, static_cast<unsigned>(std::max<std::size_t>(1, std::min<std::size_t>(options.staging_buffers, batches.size()))), capacity);
  for (std::size_t b = 0; b < batches.size(); ++b) {
    const std::size_t k = b % ring.size();
    // The buffer is free once the transfers issued from it last time are done;
    // meanwhile the other buffers' copies run on the copy engine.
    check(cudaEventSynchronize(ring.event(k)), "waiting for a staging buffer on cuda:" + std::to_string(device));
    fill(batches[b], ring.buffer(k), std::max(1u, options.reader_threads));
    for (const Transfer& t : batches[b].transfers) {
      check(cudaMemcpyAsync(t.dst, ring.buffer(k) + t.staging_off, t.n, cudaMemcpyHostToDevice, ring.stream()),
            "copying " + jobs[t.job].who + " to cuda:" + std::to_string(device));
    }
    check(cudaEventRecord(ring.event(k), ring.stream()), "recording a copy event");
    if (meter != nullptr) meter->add(batches[b].staged);
  }
  check(cudaStreamSynchronize(ring.stream()), "finishing the copies to cuda:" + std::to_string(device));
}

}  // namespace

bool cuda_built() { return true; }

int cuda_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // any error means "no device"
    return 0;
  }
  return count;
}

std::uint64_t cuda_free_bytes(int device) {
  check(cudaSetDevice(device), "selecting cuda:" + std::to_string(device));
  std::size_t free = 0, total = 0;
  check(cudaMemGetInfo(&free, &total), "querying the memory of cuda:" + std::to_string(device));
  return free;
}

std::shared_ptr<void> cuda_allocate(int device, std::uint64_t nbytes, void** out, const std::string& who) {
  check(cudaSetDevice(device), "selecting cuda:" + std::to_string(device) + " for " + who);
  void* p = nullptr;
  if (nbytes > 0) {
    check(cudaMalloc(&p, nbytes), "allocating " + std::to_string(nbytes) + " bytes on cuda:" +
                                      std::to_string(device) + " for " + who);
  }
  *out = p;
  return std::shared_ptr<void>(p, [device](void* q) {
    if (q == nullptr) return;
    int previous = 0;
    cudaGetDevice(&previous);
    cudaSetDevice(device);
    cudaFree(q);
    cudaSetDevice(previous);
  });
}

std::shared_ptr<void> cuda_allocate_pinned(std::uint64_t nbytes, void** out, const std::string& who) {
  void* p = nullptr;
  check(cudaMallocHost(&p, std::max<std::uint64_t>(nbytes, 1)),
        "allocating " + std::to_string(nbytes) + " pinned host bytes for " + who);
  *out = p;
  return std::shared_ptr<void>(p, [](void* q) { cudaFreeHost(q); });
}

void cuda_upload(std::span<const UploadJob> jobs, const CudaOptions& options, maploc::detail::ProgressMeter* meter) {
  // One pipeline per device, in device order; jobs keep their order within a device.
  std::vector<int> devices;
  for (const auto& j : jobs) {
    if (std::find(devices.begin(), devices.end(), j.device) == devices.end()) devices.push_back(j.device);
  }
  std::sort(devices.begin(), devices.end());
  for (int device : devices) {
    std::vector<std::size_t> order;
    for (std::size_t i = 0; i < jobs.size(); ++i) {
      if (jobs[i].device == device && !jobs[i].source.empty()) order.push_back(i);
    }
    upload_device(jobs, order, device, options, meter);
  }
}

void cuda_download(int device, const void* src, void* dst, std::uint64_t nbytes, const std::string& who) {
  if (nbytes == 0) return;
  check(cudaSetDevice(device), "selecting cuda:" + std::to_string(device));
  check(cudaMemcpy(dst, src, nbytes, cudaMemcpyDeviceToHost),
        "copying " + who + " back from cuda:" + std::to_string(device));
}

}  // namespace maploc::remap::detail
