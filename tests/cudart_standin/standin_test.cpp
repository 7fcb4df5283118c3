// standin_test.cpp - the CUDA runtime stand-in against the documented CUDA 12/13 semantics:
// contexts, memory, copies that leave their allocation, sticky errors, failure injection, modes.
#include "standin_test_support.h"

#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <string>

using namespace maploc::standin;
using namespace maploc::standin::test;

TEST_CASE("contexts: only cudaSetDevice and calls that need the runtime create one") {
  Control& c = fresh();
  int n = -1, version = 0, can = -1;
  unsigned flags = 7;
  int active = -1, dev = -1;
  REQUIRE(c.cuInit(0) == 0);
  CHECK(c.cuDeviceGet(&dev, 1) == 0);
  CHECK(dev == 1);
  CHECK(c.cuDevicePrimaryCtxGetState(1, &flags, &active) == 0);
  CHECK(active == 0);
  CHECK(c.cudaGetDeviceCount(&n) == 0);
  CHECK(n == 2);
  CHECK(c.cudaGetDevice(&dev) == 0);
  CHECK(dev == 0);
  CHECK(c.cudaRuntimeGetVersion(&version) == 0);
  CHECK(c.cudaDriverGetVersion(&version) == 0);
  CHECK(c.cudaDeviceCanAccessPeer(&can, 0, 1) == 0);
  CHECK(std::string(c.cudaGetErrorName(2)) == "cudaErrorMemoryAllocation");
  CHECK(c.cudaGetLastError() == 0);
  CHECK(c.cudaSetDevice(7) == cuda::kErrorInvalidDevice);
  CHECK(c.contexts_created(0) == 0);
  CHECK(c.contexts_created(1) == 0);

  // Since CUDA 12.0 cudaSetDevice initialises the context of the device it selects.
  REQUIRE(c.cudaSetDevice(1) == 0);
  CHECK(c.contexts_created(1) == 1);
  CHECK(c.contexts_created(0) == 0);
  CHECK(c.cuDevicePrimaryCtxGetState(1, &flags, &active) == 0);
  CHECK(active == 1);
  void* p = nullptr;
  REQUIRE(c.cudaMalloc(&p, 1000) == 0);
  CHECK(c.contexts_created(0) == 0);
  REQUIRE(c.cudaSetDevice(0) == 0);
  CHECK(c.contexts_created(0) == 1);
  REQUIRE(c.cudaSetDevice(1) == 0);
  CHECK(c.contexts_created(1) == 1);  // created once
  REQUIRE(c.cudaFree(p) == 0);
  REQUIRE(c.cudaSetDevice(0) == 0);

  // Any call needing the runtime creates the current device's context.
  fresh();
  std::size_t free = 0, total = 0;
  CHECK(c.cudaFree(nullptr) == 0);
  CHECK(c.contexts_created(0) == 1);
  fresh();
  CHECK(c.cudaMemGetInfo(&free, &total) == 0);
  CHECK(total == (std::size_t{1} << 30));
  CHECK(c.context_active(0) == 1);
  CHECK(c.context_active(1) == 0);
  // The driver is initialised by the runtime; before either, driver calls fail.
  fresh();
  CHECK(c.cuDevicePrimaryCtxGetState(0, &flags, &active) == 3);
  CHECK(c.cuDeviceGet(&dev, 0) == 3);
  require_clean(c);
}

TEST_CASE("memory: capacity, 256-byte alignment, pointer attributes") {
  Control& c = fresh("memory=1M");
  void *a = nullptr, *b = nullptr, *big = nullptr, *host = nullptr;
  REQUIRE(c.cudaMalloc(&a, 10) == 0);
  REQUIRE(c.cudaMalloc(&b, 10) == 0);
  CHECK(reinterpret_cast<std::uintptr_t>(a) % 256 == 0);
  CHECK(reinterpret_cast<std::uintptr_t>(b) % 256 == 0);
  CHECK(c.cudaMalloc(&big, 2 << 20) == cuda::kErrorMemoryAllocation);
  CHECK(c.cudaGetLastError() == cuda::kErrorMemoryAllocation);
  CHECK(c.cudaGetLastError() == 0);
  std::size_t free = 0, total = 0;
  REQUIRE(c.cudaMemGetInfo(&free, &total) == 0);
  CHECK(total == (1u << 20));
  CHECK(free == total - 512);
  CHECK(c.live("device_allocations") == 2);
  CHECK(c.live("device_bytes") == 20);
  REQUIRE(c.cudaHostAlloc(&host, 4096, cuda::kHostAllocPortable) == 0);

  cuda::PointerAttributesRoom room;
  std::memset(&room, 0xff, sizeof room);
  REQUIRE(c.cudaPointerGetAttributes(&room.attributes, static_cast<char*>(b) + 3) == 0);
  CHECK(room.attributes.type == cuda::kMemoryTypeDevice);
  CHECK(room.attributes.device == 0);
  CHECK(room.attributes.devicePointer == static_cast<char*>(b) + 3);
  CHECK(room.attributes.reserved[7] == 0);
  REQUIRE(c.cudaPointerGetAttributes(&room.attributes, static_cast<char*>(host) + 8) == 0);
  CHECK(room.attributes.type == cuda::kMemoryTypeHost);
  CHECK(room.attributes.hostPointer == static_cast<char*>(host) + 8);
  CHECK(room.attributes.devicePointer == static_cast<char*>(host) + 8);
  int local = 0;
  REQUIRE(c.cudaPointerGetAttributes(&room.attributes, &local) == 0);
  CHECK(room.attributes.type == cuda::kMemoryTypeUnregistered);

  CHECK(c.cudaFree(static_cast<char*>(a) + 1) == cuda::kErrorInvalidValue);
  REQUIRE(c.cudaFree(a) == 0);
  REQUIRE(c.cudaFree(b) == 0);
  REQUIRE(c.cudaFreeHost(host) == 0);
  CHECK(c.cudaFreeHost(&local) == cuda::kErrorInvalidValue);
  CHECK(c.cudaGetLastError() == cuda::kErrorInvalidValue);
  require_clean(c);
}

TEST_CASE("memory: the host cannot dereference a device pointer (SIGSEGV in a child)") {
  Control& c = fresh();
  void* p = nullptr;
  REQUIRE(c.cudaMalloc(&p, 4096) == 0);
  unsigned char pattern[16] = {1, 2, 3};
  REQUIRE(c.write_device(p, pattern, sizeof pattern) == 0);
  CHECK(device_bytes(c, p, 3) == std::vector<unsigned char>{1, 2, 3});
  pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    ::sigaction(SIGSEGV, &dfl, nullptr);
    ::sigaction(SIGBUS, &dfl, nullptr);
    volatile unsigned char byte = *static_cast<volatile unsigned char*>(p);
    (void)byte;
    ::_exit(0);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK(WIFSIGNALED(status));
  CHECK((WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV));
  REQUIRE(c.cudaFree(p) == 0);
  require_clean(c);
}

TEST_CASE("copies: out of the allocation fails asynchronously, sticky, and is recorded") {
  Control& c = fresh();
  void* p = nullptr;
  REQUIRE(c.cudaMalloc(&p, 256) == 0);
  std::vector<unsigned char> host(512, 7);
  CHECK(c.cudaMemcpyAsync(p, host.data(), 512, kH2D, nullptr) == 0);  // returns success: fails later
  CHECK(c.violations() == 1);
  CHECK(std::string(c.violation_text(0)).find("runs past the end") != std::string::npos);
  CHECK(c.cudaStreamSynchronize(nullptr) == cuda::kErrorIllegalAddress);
  // Sticky: every later call that needs the context fails, cudaGetLastError does not clear it.
  void* q = nullptr;
  CHECK(c.cudaMalloc(&q, 16) == cuda::kErrorIllegalAddress);
  CHECK(c.cudaGetLastError() == cuda::kErrorIllegalAddress);
  CHECK(c.cudaGetLastError() == cuda::kErrorIllegalAddress);
  CHECK(c.cudaFree(p) == cuda::kErrorIllegalAddress);
  int n = 0;
  CHECK(c.cudaGetDeviceCount(&n) == 0);  // no context needed
  // Device 1 is unaffected.
  REQUIRE(c.cudaSetDevice(1) == 0);
  REQUIRE(c.cudaMalloc(&q, 16) == 0);
  REQUIRE(c.cudaFree(q) == 0);
  CHECK(c.cudaSetDevice(0) == cuda::kErrorIllegalAddress);  // selects it, and its context is dead
  int dev = -1;
  CHECK(c.cudaGetDevice(&dev) == 0);
  CHECK(dev == 0);
  c.acknowledge_violations();
  // What died with device 0's context does not block a reconfiguration.
  fresh();

  // A copy that crosses from one allocation into the next.
  void *a = nullptr, *b = nullptr;
  REQUIRE(c.cudaMalloc(&a, 256) == 0);
  REQUIRE(c.cudaMalloc(&b, 256) == 0);
  REQUIRE(static_cast<char*>(b) == static_cast<char*>(a) + 256);
  CHECK(c.cudaMemcpyAsync(static_cast<char*>(a) + 128, host.data(), 256, kH2D, nullptr) == 0);
  REQUIRE(c.violations() == 1);
  CHECK(std::string(c.violation_text(0)).find("into another allocation") != std::string::npos);
  CHECK(c.synchronize_all() == cuda::kErrorIllegalAddress);
  CHECK(all_equal(device_bytes(c, b, 256), 0));  // the copy never ran
  c.acknowledge_violations();
  fresh();

  // Kind mismatches fail at once, not sticky.
  REQUIRE(c.cudaMalloc(&a, 256) == 0);
  CHECK(c.cudaMemcpyAsync(host.data(), a, 16, kH2D, nullptr) == cuda::kErrorInvalidValue);
  CHECK(c.cudaMemcpyAsync(a, host.data(), 16, kD2H, nullptr) == cuda::kErrorInvalidValue);
  CHECK(c.cudaMemcpyAsync(a, host.data(), 16, 4, nullptr) == cuda::kErrorInvalidValue);
  CHECK(c.cudaMemcpyAsync(a, host.data(), 16, kH2D, reinterpret_cast<cuda::Stream>(0x2)) ==
        cuda::kErrorInvalidValue);  // cudaStreamPerThread is refused
  CHECK(c.cudaGetLastError() == cuda::kErrorInvalidValue);
  CHECK(c.cudaGetLastError() == 0);
  REQUIRE(c.cudaFree(a) == 0);
  require_clean(c);
}

TEST_CASE("copies: protect() records writes into memory the caller did not hand over") {
  Control& c = fresh();
  void* p = nullptr;
  REQUIRE(c.cudaMalloc(&p, 1024) == 0);
  REQUIRE(c.protect(static_cast<char*>(p) + 512, 512) == 0);
  std::vector<unsigned char> host(1024, 9);
  REQUIRE(c.cudaMemcpyAsync(p, host.data(), 512, kH2D, nullptr) == 0);
  CHECK(c.violations() == 0);
  REQUIRE(c.cudaMemcpyAsync(p, host.data(), 513, kH2D, nullptr) == 0);
  CHECK(c.violations() == 1);
  CHECK(c.cudaStreamSynchronize(nullptr) == 0);  // still carried out
  CHECK(device_bytes(c, static_cast<char*>(p) + 512, 1)[0] == 9);
  c.acknowledge_violations();
  REQUIRE(c.cudaFree(p) == 0);
  require_clean(c);
}

TEST_CASE("failure injection: the nth call fails, an injected copy fails when it runs, sticky") {
  Control& c = fresh();
  void *a = nullptr, *b = nullptr;
  REQUIRE(c.fail("cudaMalloc", 2, cuda::kErrorMemoryAllocation) == 0);
  CHECK(c.fail("cudaNoSuchCall", 1, 1) != 0);
  REQUIRE(c.cudaMalloc(&a, 64) == 0);
  CHECK(c.cudaMalloc(&b, 64) == cuda::kErrorMemoryAllocation);
  REQUIRE(c.cudaMalloc(&b, 64) == 0);
  CHECK(c.calls("cudaMalloc") == 3);
  std::vector<unsigned char> host(64, 1);
  REQUIRE(c.fail("cudaMemcpyAsync", 2, cuda::kErrorLaunchFailure) == 0);
  CHECK(c.cudaMemcpyAsync(a, host.data(), 64, kH2D, nullptr) == 0);
  CHECK(c.cudaMemcpyAsync(b, host.data(), 64, kH2D, nullptr) == 0);
  CHECK(c.cudaStreamSynchronize(nullptr) == cuda::kErrorLaunchFailure);
  CHECK(c.cudaGetLastError() == cuda::kErrorLaunchFailure);
  CHECK(c.cudaMemcpyAsync(a, host.data(), 64, kH2D, nullptr) == cuda::kErrorLaunchFailure);
  CHECK(device_bytes(c, a, 1)[0] == 1);
  CHECK(device_bytes(c, b, 1)[0] == 0);
  fresh();
  require_clean(c);
}

TEST_CASE("modes: insufficient driver and no device") {
  Control& c = fresh("runtime=13000,driver=12080");
  int n = -1, version = 0;
  CHECK(c.cudaGetDeviceCount(&n) == cuda::kErrorInsufficientDriver);
  CHECK(n == 0);
  CHECK(c.cudaRuntimeGetVersion(&version) == 0);
  CHECK(version == 13000);
  CHECK(c.cudaDriverGetVersion(&version) == 0);
  CHECK(version == 12080);
  void* p = nullptr;
  CHECK(c.cudaMalloc(&p, 16) == cuda::kErrorInsufficientDriver);
  CHECK(c.cudaSetDevice(0) == cuda::kErrorInsufficientDriver);
  CHECK(c.cudaGetLastError() == cuda::kErrorInsufficientDriver);
  CHECK(std::string(c.cudaGetErrorName(35)) == "cudaErrorInsufficientDriver");
  CHECK(c.contexts_created(0) == 0);

  fresh("mode=nodevice");
  n = -1;
  CHECK(c.cudaGetDeviceCount(&n) == cuda::kErrorNoDevice);
  CHECK(n == 0);
  CHECK(c.cuInit(0) == 100);
  CHECK(c.cudaMalloc(&p, 16) == cuda::kErrorNoDevice);
  CHECK(std::string(c.cudaGetErrorString(100)) == "no CUDA-capable device is detected");
  CHECK(std::string(c.cudaGetErrorName(12345)) == "unrecognized error code");

  CHECK(c.configure("devices=x") != 0);
  CHECK(std::string(c.last_message()).find("devices") != std::string::npos);
  CHECK(c.configure("bogus=1") != 0);
  fresh("devices=3,memory=64K,h2d=1e9,d2h=2e9,d2d=1e11,peer=5e9,peer_access=0");
  REQUIRE(c.cudaGetDeviceCount(&n) == 0);
  CHECK(n == 3);
  require_clean(c);
}

TEST_CASE("peers: access rules, second enable, copies with or without access") {
  Control& c = fresh();
  int can = -1;
  REQUIRE(c.cudaDeviceCanAccessPeer(&can, 0, 0) == 0);
  CHECK(can == 0);
  REQUIRE(c.cudaDeviceCanAccessPeer(&can, 0, 1) == 0);
  CHECK(can == 1);
  void *a = nullptr, *b = nullptr;
  REQUIRE(c.cudaMalloc(&a, 256) == 0);
  std::vector<unsigned char> host(256, 5);
  REQUIRE(c.cudaMemcpyAsync(a, host.data(), 256, kH2D, nullptr) == 0);
  REQUIRE(c.cudaSetDevice(1) == 0);
  REQUIRE(c.cudaMalloc(&b, 256) == 0);
  REQUIRE(c.cudaSetDevice(0) == 0);
  REQUIRE(c.cudaMemcpyPeerAsync(b, 1, a, 0, 256, nullptr) == 0);  // without access
  REQUIRE(c.cudaStreamSynchronize(nullptr) == 0);
  CHECK(all_equal(device_bytes(c, b, 256), 5));
  CHECK(c.cudaMemcpyPeerAsync(b, 0, a, 0, 256, nullptr) == 0);  // b is not device 0's
  CHECK(c.violations() == 1);
  c.acknowledge_violations();
  CHECK(c.cudaStreamSynchronize(nullptr) == cuda::kErrorIllegalAddress);
  REQUIRE(c.cudaSetDevice(1) == 0);  // device 1 is alive: what is there must be freed
  REQUIRE(c.cudaFree(b) == 0);
  CHECK(c.cudaSetDevice(0) == cuda::kErrorIllegalAddress);
  fresh();

  REQUIRE(c.cudaDeviceEnablePeerAccess(1, 0) == 0);
  CHECK(c.cudaDeviceEnablePeerAccess(1, 0) == cuda::kErrorPeerAccessAlreadyEnabled);
  CHECK(c.cudaGetLastError() == cuda::kErrorPeerAccessAlreadyEnabled);
  CHECK(c.cudaGetLastError() == 0);  // not sticky
  CHECK(c.cudaDeviceEnablePeerAccess(0, 0) == cuda::kErrorInvalidDevice);
  fresh("peer_access=0");
  REQUIRE(c.cudaDeviceCanAccessPeer(&can, 0, 1) == 0);
  CHECK(can == 0);
  CHECK(c.cudaDeviceEnablePeerAccess(1, 0) == 217);
  CHECK(std::string(c.cudaGetErrorName(217)) == "cudaErrorPeerAccessUnsupported");
  require_clean(c);
}

TEST_CASE("accounting: live resources, and configure refuses while any is live") {
  Control& c = fresh();
  void *p = nullptr, *h = nullptr;
  cuda::Stream s = nullptr;
  cuda::Event e = nullptr;
  REQUIRE(c.cudaMalloc(&p, 100) == 0);
  REQUIRE(c.cudaHostAlloc(&h, 100, 0) == 0);
  REQUIRE(c.cudaStreamCreateWithFlags(&s, cuda::kStreamNonBlocking) == 0);
  REQUIRE(c.cudaEventCreateWithFlags(&e, cuda::kEventBlockingSync | cuda::kEventDisableTiming) == 0);
  REQUIRE(c.enqueue_fill(p, 1, 100, s, 1000) == 0);
  CHECK(c.live("device_allocations") == 1);
  CHECK(c.live("device_bytes") == 100);
  CHECK(c.live("pinned_buffers") == 1);
  CHECK(c.live("streams") == 1);
  CHECK(c.live("events") == 1);
  CHECK(c.live("pending_ops") == 1);
  CHECK(c.live("nonsense") == -1);
  CHECK(c.configure("") != 0);
  CHECK(std::string(c.last_message()).find("device_allocations=1") != std::string::npos);
  // Destroying a stream with pending work returns at once; the work runs later.
  REQUIRE(c.cudaStreamDestroy(s) == 0);
  CHECK(c.cudaStreamSynchronize(s) == cuda::kErrorInvalidResourceHandle);
  CHECK(c.live("streams") == 0);
  CHECK(c.live("pending_ops") == 1);
  CHECK(c.synchronize_all() == 0);
  CHECK(all_equal(device_bytes(c, p, 100), 1));
  REQUIRE(c.cudaEventDestroy(e) == 0);
  CHECK(c.cudaEventDestroy(e) == cuda::kErrorInvalidResourceHandle);
  REQUIRE(c.cudaFree(p) == 0);
  REQUIRE(c.cudaFreeHost(h) == 0);
  require_clean(c);
}

TEST_CASE("exit: anything live or an unacknowledged violation ends the process with status 86") {
  Control& c = fresh();
  for (int variant = 0; variant < 3; ++variant) {
    pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      void* p = nullptr;
      if (variant == 0) (void)c.cudaMalloc(&p, 64);  // a leak
      if (variant == 1) {                            // a violation nobody acknowledged
        unsigned char host[8] = {};
        void* q = nullptr;
        (void)c.cudaMalloc(&q, 4);
        (void)c.protect(q, 4);
        (void)c.cudaMemcpyAsync(q, host, 4, kH2D, nullptr);
        (void)c.cudaFree(q);
      }
      if (variant == 2) (void)c.cudaHostAlloc(&p, 64, 0);  // pinned buffers are only reported
      std::exit(0);
    }
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    INFO("variant " << variant);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == (variant == 2 ? 0 : 86));
  }
  require_clean(c);
}
