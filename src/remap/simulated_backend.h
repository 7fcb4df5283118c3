// simulated_backend.h - devices that exist only in host memory, for tests and for planning against
// a machine you are not on: late, piecewise copies on a worker thread, failure injection, accounting.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "device_backend.h"

namespace maploc::remap::detail {

/// N devices of set capacities whose memory is host memory. Copies are
/// queued per stream and carried out later by one worker thread, piece by
/// piece, reading their source when the piece runs (as late as CUDA may):
/// a stream's copies start only when something waits for them (an event or
/// stream sync) or `max_queued` copies are queued on it. So a staging buffer
/// refilled before its copy completed, a missing synchronisation or a wrong
/// offset gives wrong bytes; a copy outside an allocation is refused.
/// Everything made is counted (live()), failures can be injected.
class SimulatedBackend final : public DeviceBackend {
 public:
  struct Options {
    std::vector<std::uint64_t> capacities;          ///< one entry per device, in bytes
    std::uint64_t piece_bytes = std::uint64_t{64} << 10;  ///< bytes copied per worker step
    std::size_t max_queued = 64;  ///< queued copies that start a stream without a waiter; 0: never
  };
  /// What exists now.
  struct Live {
    std::size_t device_allocations = 0;
    std::uint64_t device_bytes = 0;
    std::size_t pinned_buffers = 0;
    std::size_t streams = 0;
    std::size_t events = 0;
  };
  /// What was done since construction.
  struct Counts {
    std::size_t device_allocations = 0;
    std::size_t pinned_allocations = 0;
    std::size_t host_to_device = 0;
    std::size_t device_to_host = 0;
    std::size_t device_to_device = 0;  ///< within one device
    std::size_t peer = 0;              ///< between devices
    std::uint64_t bytes_to_device = 0;
  };
  // Error codes, with CUDA's numbers where CUDA has one.
  static constexpr Status kInvalidValue = 1;
  static constexpr Status kOutOfMemory = 2;
  static constexpr Status kInvalidDevice = 101;
  static constexpr Status kInvalidHandle = 400;
  static constexpr Status kInjectedCopy = 9001;
  static constexpr Status kInjectedAllocation = 9002;

  explicit SimulatedBackend(Options options);
  ~SimulatedBackend() override;

  /// The nth device or pinned allocation from now fails (1: the next); 0 clears.
  void fail_allocation(std::size_t nth);
  /// The nth copy enqueued from now fails when it runs (1: the next); 0 clears.
  void fail_copy(std::size_t nth);
  Live live() const;
  Counts counts() const;
  /// The current device of the calling thread.
  int current_device() const;

  std::string name() const override { return "simulated device"; }
  int device_count() override;
  Status get_device(int* device) override;
  Status set_device(int device) override;
  Status context_active(int device, bool* active) override;
  Status mem_info(std::uint64_t* free, std::uint64_t* total) override;
  Status device_alloc(void** p, std::uint64_t n) override;
  Status device_free(void* p) override;
  Status pinned_alloc(void** p, std::uint64_t n) override;
  Status pinned_free(void* p) override;
  Status stream_create(Stream* s) override;
  Status stream_destroy(Stream s) override;
  Status stream_sync(Stream s) override;
  Status stream_wait_event(Stream s, Event e) override;
  Status event_create(Event* e) override;
  Status event_destroy(Event e) override;
  Status event_record(Event e, Stream s) override;
  Status event_sync(Event e) override;
  Status copy_async(void* dst, const void* src, std::uint64_t n, CopyKind kind, Stream s) override;
  Status copy_peer_async(void* dst, int dst_device, const void* src, int src_device, std::uint64_t n,
                         Stream s) override;
  Status pointer_info(const void* p, PointerInfo* info) override;
  std::string error_text(Status status) override;

 private:
  struct Block {
    std::uint64_t size;
    int device;  // -1 for pinned host memory
  };
  struct Copy {
    std::uint8_t* dst;
    const std::uint8_t* src;
    std::uint64_t n;
    std::uint64_t done = 0;
    bool fail = false;
  };
  struct StreamState {
    int device;
    std::deque<Copy> queue;
    std::uint64_t enqueued = 0, executed = 0, wanted = 0;
    std::uint64_t failed_at = 0;  // 1-based index of the first failed copy, 0 for none
  };
  struct EventState {
    int device;
    StreamState* stream = nullptr;
    std::uint64_t at = 0;  // the stream's enqueued count when recorded
  };

  int& current_locked();
  Status allocate_locked(void** p, std::uint64_t n, int device);
  const Block* find_locked(const void* p, std::uint64_t n, int device) const;
  Status enqueue_locked(void* dst, const void* src, std::uint64_t n, StreamState* stream);
  Status wait_locked(std::unique_lock<std::mutex>& lock, StreamState* stream, std::uint64_t upto);
  StreamState* stream_of(Stream s);
  void work();

  const Options options_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;   // the worker: a copy may run
  std::condition_variable done_;   // waiters: a copy completed
  std::map<std::uintptr_t, Block> blocks_;  // every allocation by address
  std::vector<std::uint64_t> used_;
  std::map<std::thread::id, int> current_;
  std::vector<std::unique_ptr<StreamState>> streams_;
  std::vector<std::unique_ptr<EventState>> events_;
  std::size_t fail_allocation_at_ = 0, fail_copy_at_ = 0;
  Counts counts_;
  bool stop_ = false;
  std::thread worker_;
};

}  // namespace maploc::remap::detail
