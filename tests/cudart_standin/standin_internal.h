// standin_internal.h - the shared state of the CUDA runtime stand-in (see docs/cuda-standin.md).
// Everything here is guarded by State::mu; the entry points take it through Call (api_*.cpp).
#pragma once

#include "cuda_api.h"

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#define STANDIN_EXPORT extern "C" __attribute__((visibility("default")))

namespace maploc::standin {

namespace cuda = maploc::remap::cuda;
using Error = cuda::Error;
using u64 = std::uint64_t;
using uptr = std::uintptr_t;

inline constexpr Error kErrorPeerAccessUnsupported = 217;  // cudaErrorPeerAccessUnsupported
inline constexpr Error kErrorIllegalAddress = cuda::kErrorIllegalAddress;

struct Config {
  int devices = 2;
  u64 memory = u64{1} << 30;
  double h2d = 10e9, d2h = 10e9, d2d = 500e9, peer = 20e9;
  int runtime = 13000, driver = 13000;
  bool nodevice = false;
  bool peer_access = true;
  // Bytes cudaPointerGetAttributes writes: CUDA 12/13's structure (88), or more to play a later
  // runtime whose structure grew (as CUDA 12's did over CUDA 11's 24 bytes).
  u64 attributes_bytes = sizeof(cuda::PointerAttributes);
};
// Parses "key=value,..." over the defaults; false with a message on any bad key or value.
bool parse_config(const char* spec, Config& out, std::string& message);

// Copy engines of a device. Peer copies use the destination's kH2D slot (its inbound link).
enum Engine { kEngineH2D = 0, kEngineD2H = 1, kEngineD2D = 2, kEngines = 3 };
struct EngineStats {
  u64 busy = 0, first_start = UINT64_MAX, last_end = 0, free_at = 0;
};

struct Device {
  u64 capacity = 0, used = 0;
  uptr base = 0;         // first address of its region inside the PROT_NONE reservation
  std::size_t region = 0; // bytes of its region (capacity rounded up, plus a guard gap)
  int contexts_created = 0;
  bool active = false;
  Error sticky = 0;
  u64 legacy_stream = 0;  // key of its legacy default stream in State::streams
  EngineStats engines[kEngines];
  std::vector<bool> peer_enabled;
};

struct Allocation {
  u64 id;
  int device;
  uptr base;
  std::size_t size, rounded;
};
struct Pinned {
  uptr base;
  std::size_t size;
  int device;
  unsigned flags;
};

enum class Place { None, Device, Pinned, Pageable };
struct Endpoint {
  Place place = Place::None;
  uptr addr = 0;
  u64 alloc_id = 0;  // Place::Device: the allocation it must still be at execution
  int device = -1;
};

enum class OpKind { Marker, Fill, Copy };
struct Op {
  u64 id = 0, stream = 0;
  int device = 0;  // the device of the stream it was queued on
  OpKind kind = OpKind::Marker;
  std::vector<u64> deps;  // pending happens-before predecessors at enqueue
  u64 start = 0, end = 0;
  Endpoint dst, src;
  std::size_t bytes = 0;
  int fill_value = 0;
  bool has_snapshot = false;  // pageable H2D: the source as it was at the call
  std::vector<unsigned char> snapshot;
  bool check_source = false;  // pinned H2D: checksum at enqueue, compared at execution
  u64 checksum = 0;
  Error fail = 0;  // fails at execution with this (sticky)
  std::string what;
};

struct StreamRec {
  int device = 0;
  unsigned flags = 0;
  bool legacy = false, destroyed = false;
  u64 last_op = 0, last_end = 0;
};
struct EventRec {
  int device = 0;
  unsigned flags = 0;
  bool recorded = false;
  u64 op = 0, end = 0;
};

struct State {
  std::mutex mu;
  bool initialised = false;
  std::string init_error;  // a bad MAPLOC_STANDIN: every call fails with cudaErrorInitializationError
  u64 generation = 1;      // bumped by configure: thread-local state older than this is reset
  Config config;
  std::vector<Device> devices;
  bool driver_initialised = false;
  int memfd = -1;
  unsigned char* reservation = nullptr;  // PROT_NONE: the device pointers
  unsigned char* shadow = nullptr;       // read-write view of the same memory
  std::size_t total = 0;
  std::map<uptr, Allocation> allocations;  // by base
  std::map<uptr, Pinned> pinned;           // by base
  std::map<u64, StreamRec> streams;        // by handle value (legacy streams: small keys)
  std::map<u64, EventRec> events;          // by handle value
  std::map<u64, Op> ops;                   // queued, not yet executed, by id
  u64 next_op = 1, next_alloc = 1, next_handle = 1;
  u64 now = 0;
  u64 spinning_waits = 0;
  std::vector<std::string> violations;
  std::vector<std::pair<uptr, std::size_t>> protected_ranges;
  std::map<std::string, u64> calls;
  std::map<std::string, std::map<u64, Error>> injections;  // entry point -> call number -> error
  std::string message;                                     // maploc_standin_last_message
};

struct ThreadState {
  u64 generation = 0;
  int device = 0;
  Error last = 0;
};

State& state();                       // the process's one state (not locked)
void ensure_initialised(State& s);    // first use: MAPLOC_STANDIN (locked by caller)
ThreadState& thread_state(State& s);  // the calling thread's, reset after a configure
// Replaces the configuration (memory mappings, devices, streams); caller checked nothing is live.
bool apply_config(State& s, const Config& config, std::string& message);
void create_context(State& s, int device);
bool sticky_error(Error e);

// memory.cpp
int device_of_address(const State& s, uptr p);  // -1: not inside the reservation
const Allocation* allocation_containing(const State& s, uptr p);
const Pinned* pinned_containing(const State& s, uptr p);
unsigned char* shadow_of(const State& s, uptr device_address);
Error device_malloc(State& s, int device, std::size_t size, void** out);
Error device_free(State& s, uptr p);
// 0: [p, p+n) is inside one live allocation; else a description of what is wrong.
std::string check_device_range(const State& s, uptr p, std::size_t n, const Allocation** found);
u64 checksum(const unsigned char* p, std::size_t n);
void add_violation(State& s, std::string text);

// timeline.cpp
u64 stream_key(State& s, cuda::Stream stream, Error* error);  // 0 with *error on a bad handle
// Queues op on the stream: deps, start and end. engine_device < 0: no engine.
u64 enqueue(State& s, u64 stream, Op op, u64 wait_op, u64 wait_end, int engine_device, int engine, double bandwidth);
// Executes every pending predecessor of the targets (and the targets), in completion order;
// the host's now moves to wait_until. Returns the first error of an executed op, or 0.
Error complete(State& s, const std::vector<u64>& targets, u64 wait_until);
Error complete_all(State& s);
Error complete_device(State& s, int device);
std::string describe(const void* p);

// One entry point call: holds the lock, counts the call, takes a pending injected failure.
enum : unsigned { kNeedsContext = 1, kDeferInjection = 2, kVersionQuery = 4 };
struct Call {
  State& s;
  std::unique_lock<std::mutex> lock;
  ThreadState* t = nullptr;
  Error injected = 0;
  explicit Call(const char* name);
  // The checks every call makes: a bad configuration, an insufficient driver, no device, an injected
  // failure (not kDeferInjection), then kNeedsContext: the current device's context, its sticky error.
  Error begin(unsigned flags);
  Error ret(Error e);  // records a non-sticky error as the thread's last error
  int device() const { return t->device; }
};

}  // namespace maploc::standin
