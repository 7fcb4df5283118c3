// physical_reference_cuda.cpp - R5-R7: host-to-device copies from pinned and pageable memory and the
// pread -> pinned ring -> device pipeline (loading-performance-and-security.md A.9, A.13).
//
// Every CUDA call is checked. A reference whose call fails prints which call failed and why on
// stderr and adds no row: nothing rather than a wrong figure. Whatever was made is freed on every path.
#include <cuda_runtime_api.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "physical_reference.h"

namespace bench {
namespace {

// Prints "<reference>: <call> failed: <name> (<text>)" and returns false unless rc is cudaSuccess.
bool ok(cudaError_t rc, const char* reference, const char* call) {
  if (rc == cudaSuccess) return true;
  std::fprintf(stderr, "maploc_bench_physical: %s: %s failed: %s (%s); nothing reported for %s\n", reference, call,
               cudaGetErrorName(rc), cudaGetErrorString(rc), reference);
  return false;
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Everything the references make, freed on every path (after the device is idle, so no copy
// still reads a host buffer or writes device memory being freed).
struct Resources {
  void* dev = nullptr;
  void* pinned = nullptr;
  cudaStream_t stream = nullptr;
  std::vector<void*> slots;
  std::vector<cudaStream_t> streams;
  std::vector<cudaEvent_t> events;

  Resources() = default;
  Resources(const Resources&) = delete;
  Resources& operator=(const Resources&) = delete;
  ~Resources() {
    (void)cudaDeviceSynchronize();
    for (cudaEvent_t e : events) {
      if (e != nullptr) (void)cudaEventDestroy(e);
    }
    for (cudaStream_t s : streams) {
      if (s != nullptr) (void)cudaStreamDestroy(s);
    }
    for (void* p : slots) {
      if (p != nullptr) (void)cudaFreeHost(p);
    }
    if (stream != nullptr) (void)cudaStreamDestroy(stream);
    if (pinned != nullptr) (void)cudaFreeHost(pinned);
    if (dev != nullptr) (void)cudaFree(dev);
  }
};

// R5: one stream, cudaMemcpyAsync of n bytes from pinned memory, waited for.
bool h2d_pinned(Resources& r, std::size_t n, int reps, std::vector<double>& out) {
  const char* ref = "h2d_pinned";
  for (int i = 0; i < reps; ++i) {
    const double t0 = now_s();
    if (!ok(cudaMemcpyAsync(r.dev, r.pinned, n, cudaMemcpyHostToDevice, r.stream), ref, "cudaMemcpyAsync")) return false;
    if (!ok(cudaStreamSynchronize(r.stream), ref, "cudaStreamSynchronize")) return false;
    out.push_back(static_cast<double>(n) / 1e9 / (now_s() - t0));
  }
  return true;
}

// R6: cudaMemcpy of n bytes from malloc'd (pageable) memory.
bool h2d_pageable(Resources& r, const std::vector<std::uint8_t>& pageable, int reps, std::vector<double>& out) {
  const char* ref = "h2d_pageable";
  for (int i = 0; i < reps; ++i) {
    const double t0 = now_s();
    if (!ok(cudaMemcpy(r.dev, pageable.data(), pageable.size(), cudaMemcpyHostToDevice), ref, "cudaMemcpy")) {
      return false;
    }
    out.push_back(static_cast<double>(pageable.size()) / 1e9 / (now_s() - t0));
  }
  return true;
}

// R7: each thread owns two pinned slots and a stream; it preads the next chunk into one slot while
// the other's DMA runs. Ring memory: threads x 2 x chunk.
bool pipeline(Resources& r, int fd, std::size_t size, unsigned threads, std::size_t chunk, int reps,
              std::vector<double>& out) {
  const char* ref = "pipeline_pread_pinned_ring_h2d";
  r.slots.assign(2 * threads, nullptr);
  r.streams.assign(threads, nullptr);
  r.events.assign(2 * threads, nullptr);
  for (unsigned t = 0; t < threads; ++t) {
    if (!ok(cudaStreamCreate(&r.streams[t]), ref, "cudaStreamCreate")) return false;
  }
  for (std::size_t i = 0; i < r.slots.size(); ++i) {
    if (!ok(cudaMallocHost(&r.slots[i], chunk), ref, "cudaMallocHost (ring slot)")) return false;
    if (!ok(cudaEventCreateWithFlags(&r.events[i], cudaEventDisableTiming), ref, "cudaEventCreateWithFlags")) {
      return false;
    }
  }
  for (int rep = 0; rep < reps; ++rep) {
    std::atomic<std::size_t> next{0};
    std::atomic<bool> failed{false};
    std::mutex first_error_mutex;
    std::string first_error;
    // Records the first failure (printed once, after the threads are joined) and stops every thread.
    auto fail = [&](const std::string& what) {
      const std::lock_guard lock(first_error_mutex);
      if (first_error.empty()) first_error = what;
      failed = true;
    };
    auto check = [&](cudaError_t rc, const char* call) {
      if (rc == cudaSuccess) return true;
      fail(std::string(call) + " failed: " + cudaGetErrorName(rc) + " (" + cudaGetErrorString(rc) + ")");
      return false;
    };
    const double t0 = now_s();
    auto worker = [&](unsigned t) {
      if (!check(cudaSetDevice(0), "cudaSetDevice")) return;
      for (unsigned k = 0; !failed; ++k) {
        const std::size_t lo = next.fetch_add(chunk);
        if (lo >= size) break;
        const std::size_t len = std::min(chunk, size - lo);
        const std::size_t slot = 2 * t + (k & 1);
        if (!check(cudaEventSynchronize(r.events[slot]), "cudaEventSynchronize")) return;
        auto* p = static_cast<std::uint8_t*>(r.slots[slot]);
        for (std::size_t got = 0; got < len;) {
          const ssize_t g = ::pread(fd, p + got, len - got, static_cast<off_t>(lo + got));
          if (g <= 0) {
            fail(g == 0 ? std::string("pread: unexpected end of file") : std::string("pread: ") + std::strerror(errno));
            return;
          }
          got += static_cast<std::size_t>(g);
        }
        if (!check(cudaMemcpyAsync(static_cast<std::uint8_t*>(r.dev) + lo, p, len, cudaMemcpyHostToDevice,
                                   r.streams[t]),
                   "cudaMemcpyAsync")) {
          return;
        }
        if (!check(cudaEventRecord(r.events[slot], r.streams[t]), "cudaEventRecord")) return;
      }
      (void)check(cudaStreamSynchronize(r.streams[t]), "cudaStreamSynchronize");
    };
    std::vector<std::thread> pool;
    for (unsigned t = 0; t < threads; ++t) pool.emplace_back(worker, t);
    for (auto& th : pool) th.join();
    if (failed) {
      std::fprintf(stderr, "maploc_bench_physical: %s: %s; nothing reported for %s\n", ref, first_error.c_str(), ref);
      return false;
    }
    out.push_back(static_cast<double>(size) / 1e9 / (now_s() - t0));
  }
  return true;
}

}  // namespace

void gpu_references(int fd, std::size_t size, unsigned threads, std::size_t chunk, int reps, Report& report) {
  int count = 0;
  const cudaError_t rc = cudaGetDeviceCount(&count);
  if (rc != cudaSuccess || count == 0) {
    std::fprintf(stderr, "maploc_bench_physical: no CUDA device (cudaGetDeviceCount: %s): no GPU reference\n",
                 rc == cudaSuccess ? "0 devices" : cudaGetErrorString(rc));
    return;
  }
  const char* setup = "the GPU references";
  if (!ok(cudaSetDevice(0), setup, "cudaSetDevice(0)") || !ok(cudaFree(nullptr), setup, "cudaFree(nullptr) (context)")) {
    return;
  }
  reps = std::max(reps, 1);
  threads = std::max(threads, 1u);
  const std::size_t n = std::size_t{256} << 20;
  Resources r;
  if (!ok(cudaMalloc(&r.dev, std::max(n, size)), setup, "cudaMalloc")) return;

  std::vector<double> v;
  if (ok(cudaMallocHost(&r.pinned, n), "h2d_pinned", "cudaMallocHost") &&
      ok(cudaStreamCreate(&r.stream), "h2d_pinned", "cudaStreamCreate")) {
    std::memset(r.pinned, 1, n);
    if (h2d_pinned(r, n, reps, v)) {
      report.add("h2d_pinned", v, "cudaMemcpyAsync of 256 MiB from cudaMallocHost memory, one stream");
    }
  }

  v.clear();
  const std::vector<std::uint8_t> pageable(n, 1);
  if (h2d_pageable(r, pageable, reps, v)) report.add("h2d_pageable", v, "cudaMemcpy of 256 MiB from malloc'd memory");

  v.clear();
  if (size > 0 && chunk > 0 && pipeline(r, fd, size, threads, chunk, reps, v)) {
    report.add("pipeline_pread_pinned_ring_h2d", v, "threads x 2 pinned slots of chunk bytes, one stream per thread");
  }
}

}  // namespace bench
