// physical_reference_cuda.cpp - R5-R7: host-to-device copies from pinned and pageable memory and the
// pread -> pinned ring -> device pipeline (loading-performance-and-security.md A.9, A.13).
#include <cuda_runtime_api.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "physical_reference.h"

namespace bench {
namespace {

bool ok(cudaError_t rc, const char* what) {
  if (rc == cudaSuccess) return true;
  std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(rc));
  return false;
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

void gpu_references(int fd, std::size_t size, unsigned threads, std::size_t chunk, int reps, Report& report) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) return;
  if (!ok(cudaSetDevice(0), "cudaSetDevice") || !ok(cudaFree(nullptr), "context")) return;
  const std::size_t n = std::size_t{256} << 20;
  void* dev = nullptr;
  void* pinned = nullptr;
  if (!ok(cudaMalloc(&dev, std::max(n, size)), "cudaMalloc")) return;
  if (!ok(cudaMallocHost(&pinned, n), "cudaMallocHost")) return;
  std::memset(pinned, 1, n);
  std::vector<std::uint8_t> pageable(n, 1);
  cudaStream_t s;
  cudaStreamCreate(&s);
  std::vector<double> v_pinned, v_pageable, v_pipe;
  for (int r = 0; r < reps; ++r) {
    double t0 = now_s();
    cudaMemcpyAsync(dev, pinned, n, cudaMemcpyHostToDevice, s);
    cudaStreamSynchronize(s);
    v_pinned.push_back(static_cast<double>(n) / 1e9 / (now_s() - t0));
    t0 = now_s();
    cudaMemcpy(dev, pageable.data(), n, cudaMemcpyHostToDevice);
    v_pageable.push_back(static_cast<double>(n) / 1e9 / (now_s() - t0));
  }
  report.add("h2d_pinned", v_pinned, "cudaMemcpyAsync of 256 MiB from cudaMallocHost memory, one stream");
  report.add("h2d_pageable", v_pageable, "cudaMemcpy of 256 MiB from malloc'd memory");

  // R7: each thread owns two pinned slots and a stream; it preads the next chunk into one slot while
  // the other's DMA runs. Ring memory: threads x 2 x chunk.
  std::vector<void*> slots(2 * threads, nullptr);
  std::vector<cudaStream_t> streams(threads);
  std::vector<cudaEvent_t> events(2 * threads);
  for (unsigned t = 0; t < threads; ++t) cudaStreamCreate(&streams[t]);
  for (std::size_t i = 0; i < slots.size(); ++i) {
    if (!ok(cudaMallocHost(&slots[i], chunk), "ring")) return;
    cudaEventCreateWithFlags(&events[i], cudaEventDisableTiming);
  }
  for (int r = 0; r < reps; ++r) {
    std::atomic<std::size_t> next{0};
    const double t0 = now_s();
    auto worker = [&](unsigned t) {
      cudaSetDevice(0);
      for (unsigned k = 0;; ++k) {
        const std::size_t lo = next.fetch_add(chunk);
        if (lo >= size) break;
        const std::size_t len = std::min(chunk, size - lo);
        const std::size_t slot = 2 * t + (k & 1);
        cudaEventSynchronize(events[slot]);
        auto* p = static_cast<std::uint8_t*>(slots[slot]);
        for (std::size_t got = 0; got < len;) {
          const ssize_t g = ::pread(fd, p + got, len - got, static_cast<off_t>(lo + got));
          if (g <= 0) std::abort();
          got += static_cast<std::size_t>(g);
        }
        cudaMemcpyAsync(static_cast<std::uint8_t*>(dev) + lo, p, len, cudaMemcpyHostToDevice, streams[t]);
        cudaEventRecord(events[slot], streams[t]);
      }
      cudaStreamSynchronize(streams[t]);
    };
    std::vector<std::thread> pool;
    for (unsigned t = 0; t < threads; ++t) pool.emplace_back(worker, t);
    for (auto& th : pool) th.join();
    v_pipe.push_back(static_cast<double>(size) / 1e9 / (now_s() - t0));
  }
  report.add("pipeline_pread_pinned_ring_h2d", v_pipe, "threads x 2 pinned slots of chunk bytes, one stream per thread");
  for (void* p : slots) cudaFreeHost(p);
  cudaFreeHost(pinned);
  cudaFree(dev);
}

}  // namespace bench
