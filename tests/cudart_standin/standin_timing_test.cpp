// standin_timing_test.cpp - the stand-in's streams and virtual time: legacy/blocking/non-blocking
// ordering with the caller's work, events, pageable vs pinned host memory, copy engines.
#include "standin_test_support.h"

#include <algorithm>
#include <atomic>
#include <thread>

using namespace maploc::standin;
using namespace maploc::standin::test;

namespace {

struct Buffers {
  Control& c;
  void* dev = nullptr;
  void* pinned = nullptr;
  std::size_t n;
  Buffers(Control& control, std::size_t bytes, unsigned char pinned_value) : c(control), n(bytes) {
    REQUIRE(c.cudaMalloc(&dev, n) == 0);
    REQUIRE(c.cudaHostAlloc(&pinned, n, 0) == 0);
    std::memset(pinned, pinned_value, n);
  }
  ~Buffers() {
    CHECK(c.cudaFree(dev) == 0);
    CHECK(c.cudaFreeHost(pinned) == 0);
  }
};

}  // namespace

TEST_CASE("streams: a non-blocking stream is not ordered after the caller's legacy-stream work") {
  Control& c = fresh();
  Buffers b(c, 4096, 0x11);
  cuda::Stream s = nullptr;
  REQUIRE(c.cudaStreamCreateWithFlags(&s, cuda::kStreamNonBlocking) == 0);
  REQUIRE(c.enqueue_fill(b.dev, 0xAA, b.n, nullptr, 1'000'000) == 0);  // the caller's memset, 1 ms
  REQUIRE(c.cudaMemcpyAsync(b.dev, b.pinned, b.n, kH2D, s) == 0);
  REQUIRE(c.cudaStreamSynchronize(s) == 0);
  CHECK(c.now_ns() < 1'000'000);  // did not wait for the memset
  REQUIRE(c.cudaStreamSynchronize(nullptr) == 0);
  CHECK(all_equal(device_bytes(c, b.dev, b.n), 0xAA));  // the memset landed after the copy: the bug

  // Ordered through an event recorded on the caller's stream.
  cuda::Event e = nullptr;
  REQUIRE(c.cudaEventCreateWithFlags(&e, cuda::kEventBlockingSync | cuda::kEventDisableTiming) == 0);
  const auto t0 = c.now_ns();
  REQUIRE(c.enqueue_fill(b.dev, 0xAA, b.n, nullptr, 1'000'000) == 0);
  REQUIRE(c.cudaEventRecord(e, nullptr) == 0);
  REQUIRE(c.cudaStreamWaitEvent(s, e, 0) == 0);
  REQUIRE(c.cudaMemcpyAsync(b.dev, b.pinned, b.n, kH2D, s) == 0);
  REQUIRE(c.cudaStreamSynchronize(s) == 0);
  CHECK(c.now_ns() >= t0 + 1'000'000);
  CHECK(all_equal(device_bytes(c, b.dev, b.n), 0x11));
  CHECK(c.spinning_waits() == 0);
  REQUIRE(c.cudaEventDestroy(e) == 0);
  REQUIRE(c.cudaStreamDestroy(s) == 0);
}

TEST_CASE("streams: blocking streams and the legacy default stream wait for each other") {
  Control& c = fresh("h2d=1e9");
  Buffers b(c, 1 << 20, 0x22);
  cuda::Stream s = nullptr;
  REQUIRE(c.cudaStreamCreateWithFlags(&s, cuda::kStreamDefault) == 0);
  // Blocking-stream work waits for earlier legacy-stream work.
  REQUIRE(c.enqueue_fill(b.dev, 0xAA, b.n, nullptr, 1'000'000) == 0);
  REQUIRE(c.cudaMemcpyAsync(b.dev, b.pinned, b.n, kH2D, s) == 0);
  REQUIRE(c.cudaStreamSynchronize(s) == 0);
  CHECK(c.now_ns() == 1'000'000 + (1u << 20));  // 1 ms fill, then 1 MiB at 1 GB/s
  CHECK(all_equal(device_bytes(c, b.dev, b.n), 0x22));
  // Legacy-stream work waits for earlier blocking-stream work.
  REQUIRE(c.cudaMemcpyAsync(b.dev, b.pinned, b.n, kH2D, s) == 0);
  REQUIRE(c.enqueue_fill(b.dev, 0x33, b.n, nullptr, 0) == 0);
  REQUIRE(c.cudaStreamSynchronize(nullptr) == 0);
  CHECK(c.now_ns() == 1'000'000 + 2 * (1u << 20));
  CHECK(all_equal(device_bytes(c, b.dev, b.n), 0x33));
  // Legacy work of another device does not order this device's streams.
  REQUIRE(c.cudaSetDevice(1) == 0);
  void* other = nullptr;
  REQUIRE(c.cudaMalloc(&other, 256) == 0);
  REQUIRE(c.enqueue_fill(other, 1, 256, nullptr, 5'000'000) == 0);
  REQUIRE(c.cudaSetDevice(0) == 0);
  const auto t = c.now_ns();
  REQUIRE(c.cudaMemcpyAsync(b.dev, b.pinned, 256, kH2D, s) == 0);
  REQUIRE(c.cudaStreamSynchronize(s) == 0);
  CHECK(c.now_ns() < t + 5'000'000);
  CHECK(c.live("pending_ops") == 1);
  REQUIRE(c.cudaFree(other) == 0);  // cudaFree synchronises device 1 first
  CHECK(c.now_ns() >= t + 5'000'000);
  REQUIRE(c.cudaStreamDestroy(s) == 0);
}

TEST_CASE("host memory: pageable sources are staged at the call, pinned ones read when the copy runs") {
  Control& c = fresh();
  Buffers b(c, 256, 0x44);
  std::vector<unsigned char> pageable(256, 0x55);
  REQUIRE(c.cudaMemcpyAsync(b.dev, pageable.data(), 256, kH2D, nullptr) == 0);
  std::fill(pageable.begin(), pageable.end(), 0x66);  // allowed: it was staged
  REQUIRE(c.cudaStreamSynchronize(nullptr) == 0);
  CHECK(all_equal(device_bytes(c, b.dev, 256), 0x55));
  CHECK(c.violations() == 0);

  REQUIRE(c.cudaMemcpyAsync(b.dev, b.pinned, 256, kH2D, nullptr) == 0);
  std::memset(b.pinned, 0x77, 256);  // the staging buffer rewritten before its copy ran
  REQUIRE(c.cudaStreamSynchronize(nullptr) == 0);
  CHECK(all_equal(device_bytes(c, b.dev, 256), 0x77));
  REQUIRE(c.violations() == 1);
  CHECK(std::string(c.violation_text(0)).find("rewritten before the copy") != std::string::npos);
  c.acknowledge_violations();

  // D2H into pageable memory is synchronous: it waits for the stream's earlier work.
  REQUIRE(c.enqueue_fill(b.dev, 0x12, 256, nullptr, 2'000'000) == 0);
  const auto t = c.now_ns();
  REQUIRE(c.cudaMemcpyAsync(pageable.data(), b.dev, 256, kD2H, nullptr) == 0);
  CHECK(all_equal(pageable, 0x12));
  CHECK(c.now_ns() >= t + 2'000'000);
  CHECK(c.live("pending_ops") == 0);
  // D2H into pinned memory is asynchronous.
  REQUIRE(c.cudaMemcpyAsync(b.pinned, b.dev, 256, kD2H, nullptr) == 0);
  CHECK(all_equal(std::vector<unsigned char>(static_cast<unsigned char*>(b.pinned), static_cast<unsigned char*>(b.pinned) + 256), 0x77));
  REQUIRE(c.cudaStreamSynchronize(nullptr) == 0);
  CHECK(all_equal(std::vector<unsigned char>(static_cast<unsigned char*>(b.pinned), static_cast<unsigned char*>(b.pinned) + 256), 0x12));
}

TEST_CASE("events: record, wait, synchronize, device check, spinning waits") {
  Control& c = fresh();
  cuda::Event spin = nullptr, blocking = nullptr;
  REQUIRE(c.cudaEventCreateWithFlags(&spin, 0) == 0);
  REQUIRE(c.cudaEventCreateWithFlags(&blocking, cuda::kEventBlockingSync) == 0);
  CHECK(c.cudaEventSynchronize(spin) == 0);  // never recorded: success at once
  CHECK(c.spinning_waits() == 1);
  void* p = nullptr;
  REQUIRE(c.cudaMalloc(&p, 256) == 0);
  REQUIRE(c.enqueue_fill(p, 3, 256, nullptr, 700) == 0);
  REQUIRE(c.cudaEventRecord(blocking, nullptr) == 0);
  REQUIRE(c.enqueue_fill(p, 4, 256, nullptr, 700) == 0);
  REQUIRE(c.cudaEventSynchronize(blocking) == 0);
  CHECK(c.now_ns() == 700);
  CHECK(all_equal(device_bytes(c, p, 256), 3));  // only the captured work ran
  CHECK(c.spinning_waits() == 1);
  REQUIRE(c.cudaSetDevice(1) == 0);
  cuda::Stream s1 = nullptr;
  REQUIRE(c.cudaStreamCreateWithFlags(&s1, cuda::kStreamNonBlocking) == 0);
  CHECK(c.cudaEventRecord(blocking, s1) == cuda::kErrorInvalidResourceHandle);  // event of device 0
  REQUIRE(c.cudaStreamDestroy(s1) == 0);
  REQUIRE(c.cudaSetDevice(0) == 0);
  REQUIRE(c.cudaFree(p) == 0);
  CHECK(all_equal(std::vector<unsigned char>{}, 0));
  REQUIRE(c.cudaEventDestroy(spin) == 0);
  REQUIRE(c.cudaEventDestroy(blocking) == 0);
  require_clean(c);
}

TEST_CASE("engines: two devices copy concurrently, one device's engine serialises") {
  Control& c = fresh("h2d=1e9");
  const std::size_t n = 1 << 20;
  void *d0 = nullptr, *d1 = nullptr, *d0b = nullptr, *host = nullptr;
  cuda::Stream s0 = nullptr, s1 = nullptr, s0b = nullptr;
  REQUIRE(c.cudaHostAlloc(&host, n, cuda::kHostAllocPortable) == 0);
  REQUIRE(c.cudaMalloc(&d0, n) == 0);
  REQUIRE(c.cudaMalloc(&d0b, n) == 0);
  REQUIRE(c.cudaStreamCreateWithFlags(&s0, cuda::kStreamNonBlocking) == 0);
  REQUIRE(c.cudaStreamCreateWithFlags(&s0b, cuda::kStreamNonBlocking) == 0);
  REQUIRE(c.cudaSetDevice(1) == 0);
  REQUIRE(c.cudaMalloc(&d1, n) == 0);
  REQUIRE(c.cudaStreamCreateWithFlags(&s1, cuda::kStreamNonBlocking) == 0);
  REQUIRE(c.cudaSetDevice(0) == 0);

  REQUIRE(c.cudaMemcpyAsync(d0, host, n, kH2D, s0) == 0);
  REQUIRE(c.cudaMemcpyAsync(d1, host, n, kH2D, s1) == 0);
  REQUIRE(c.synchronize_all() == 0);
  CHECK(c.engine_busy_ns(0, 0) == n);
  CHECK(c.engine_busy_ns(1, 0) == n);
  CHECK(c.engine_first_start_ns(0, 0) == c.engine_first_start_ns(1, 0));
  CHECK(c.engine_last_end_ns(0, 0) == c.engine_last_end_ns(1, 0));
  CHECK(c.now_ns() == n);  // both in 1 ms of virtual time: they overlapped

  c.reset_clock_stats();
  const auto t = c.now_ns();
  REQUIRE(c.cudaMemcpyAsync(d0, host, n, kH2D, s0) == 0);
  REQUIRE(c.cudaMemcpyAsync(d0b, host, n, kH2D, s0b) == 0);  // another stream, same engine
  REQUIRE(c.synchronize_all() == 0);
  CHECK(c.engine_busy_ns(0, 0) == 2 * n);
  CHECK(c.engine_first_start_ns(0, 0) == t);
  CHECK(c.engine_last_end_ns(0, 0) == t + 2 * n);
  CHECK(c.engine_busy_ns(1, 0) == 0);
  CHECK(c.engine_busy_ns(0, 1) == 0);

  c.reset_clock_stats();
  REQUIRE(c.cudaMemcpyPeerAsync(d1, 1, d0, 0, n, s0) == 0);  // peer: the destination's inbound slot
  REQUIRE(c.cudaStreamSynchronize(s0) == 0);
  CHECK(c.engine_busy_ns(1, 0) == (n + 19) / 20);  // 20 GB/s default, rounded up
  for (cuda::Stream s : {s0, s0b, s1}) REQUIRE(c.cudaStreamDestroy(s) == 0);
  for (void* p : {d0, d0b, d1}) REQUIRE(c.cudaFree(p) == 0);
  REQUIRE(c.cudaFreeHost(host) == 0);
  require_clean(c);
}

TEST_CASE("threads: calls from several threads are serialised safely") {
  // Every call is counted and must succeed: a stand-in whose calls all failed would otherwise leave
  // nothing live and pass.
  Control& c = fresh();
  constexpr int kThreads = 4;
  constexpr int kRounds = 50;
  std::atomic<int> set_device{0}, mallocs{0}, copies{0}, syncs{0}, readbacks{0}, frees{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      if (c.cudaSetDevice(t % 2) != 0) return;
      ++set_device;
      for (int i = 0; i < kRounds; ++i) {
        void* p = nullptr;
        const auto value = static_cast<unsigned char>(t * kRounds + i);
        std::vector<unsigned char> host(512, value);
        if (c.cudaMalloc(&p, 512) != 0) return;
        ++mallocs;
        if (c.cudaMemcpyAsync(p, host.data(), 512, kH2D, nullptr) == 0) ++copies;
        if (c.cudaStreamSynchronize(nullptr) == 0) ++syncs;
        std::vector<unsigned char> back(512, static_cast<unsigned char>(~value));
        if (c.device_bytes(p, back.data(), 512) == 0 && back == host) ++readbacks;
        if (c.cudaFree(p) == 0) ++frees;
      }
    });
  for (auto& t : threads) t.join();
  CHECK(set_device == kThreads);
  CHECK(mallocs == kThreads * kRounds);
  CHECK(copies == kThreads * kRounds);
  CHECK(syncs == kThreads * kRounds);
  CHECK(readbacks == kThreads * kRounds);
  CHECK(frees == kThreads * kRounds);
  require_clean(c);
}
