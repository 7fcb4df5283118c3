// api_stream.cpp - the CUDA entry points for streams, events and asynchronous copies.
#include "standin_internal.h"

#include <cstring>

using namespace maploc::standin;
namespace cuda = maploc::remap::cuda;

namespace {

u64 new_handle(State& s) { return (u64{0x57a} << 36) | (s.next_handle++ << 4); }

// The stream's device must be alive too (its context is the one that runs the work).
Error stream_sticky(const State& s, u64 key) { return s.devices[static_cast<std::size_t>(s.streams.at(key).device)].sticky; }

// Where a host range of a copy lives; a range that starts in a pinned buffer and leaves it is a
// violation (the DMA engine would run off the locked pages).
Endpoint host_endpoint(const State& s, uptr p, std::size_t n, std::string& problem) {
  Endpoint e;
  e.addr = p;
  if (const Pinned* b = pinned_containing(s, p)) {
    e.place = Place::Pinned;
    e.device = b->device;
    if (n > b->size - (p - b->base))
      problem = "host range " + describe(reinterpret_cast<void*>(p)) + " + " + std::to_string(n) +
                " runs past the end of its pinned buffer " + describe(reinterpret_cast<void*>(b->base));
  } else {
    e.place = Place::Pageable;
  }
  return e;
}

Endpoint device_endpoint(State& s, uptr p, std::size_t n, std::string& problem, const char* role) {
  Endpoint e;
  e.place = Place::Device;
  e.addr = p;
  e.device = device_of_address(s, p);
  const Allocation* a = nullptr;
  std::string wrong = check_device_range(s, p, n, &a);
  if (!wrong.empty() && problem.empty()) problem = std::string(role) + ": " + wrong;
  if (a) e.alloc_id = a->id;
  return e;
}

// Queues a checked copy. kind: 1 H2D, 2 D2H, 3 D2D; peer copies come with kind 3.
Error queue_copy(Call& c, u64 key, uptr dst, uptr src, std::size_t count, int kind, int dst_device, int src_device,
                 const char* entry) {
  State& s = c.s;
  std::string problem;
  Op op;
  op.kind = OpKind::Copy;
  op.bytes = count;
  if (kind == cuda::kMemcpyHostToDevice) {
    op.dst = device_endpoint(s, dst, count, problem, "destination");
    op.src = host_endpoint(s, src, count, problem);
  } else if (kind == cuda::kMemcpyDeviceToHost) {
    op.src = device_endpoint(s, src, count, problem, "source");
    op.dst = host_endpoint(s, dst, count, problem);
  } else {
    op.dst = device_endpoint(s, dst, count, problem, "destination");
    op.src = device_endpoint(s, src, count, problem, "source");
  }
  if (dst_device >= 0 && op.dst.device != dst_device && problem.empty())
    problem = "destination is not memory of device " + std::to_string(dst_device);
  if (src_device >= 0 && op.src.device != src_device && problem.empty())
    problem = "source is not memory of device " + std::to_string(src_device);
  op.what = std::string(entry) + "(dst " + describe(reinterpret_cast<void*>(dst)) + ", src " +
            describe(reinterpret_cast<void*>(src)) + ", " + std::to_string(count) + " bytes)";
  if (!problem.empty()) {
    op.fail = kErrorIllegalAddress;
    add_violation(s, op.what + ": " + problem);
  } else {
    if (op.src.place == Place::Pageable) {  // staged at the call; the caller may reuse its buffer
      op.has_snapshot = true;
      op.snapshot.assign(reinterpret_cast<const unsigned char*>(src), reinterpret_cast<const unsigned char*>(src) + count);
    } else if (op.src.place == Place::Pinned) {
      op.check_source = true;
      op.checksum = checksum(reinterpret_cast<const unsigned char*>(src), count);
    }
    for (auto& [base, n] : s.protected_ranges)
      if (op.dst.place == Place::Device && dst < base + n && base < dst + count)
        add_violation(s, op.what + ": writes into protected range " + describe(reinterpret_cast<void*>(base)) + " + " +
                             std::to_string(n));
  }
  if (c.injected) op.fail = c.injected;  // injected: the call succeeds, the copy fails when it runs
  int engine_device = -1, engine = 0;
  double bandwidth = 1;
  if (kind == cuda::kMemcpyHostToDevice) {
    engine_device = op.dst.device, engine = kEngineH2D, bandwidth = s.config.h2d;
  } else if (kind == cuda::kMemcpyDeviceToHost) {
    engine_device = op.src.device, engine = kEngineD2H, bandwidth = s.config.d2h;
  } else if (op.dst.device == op.src.device) {
    engine_device = op.dst.device, engine = kEngineD2D, bandwidth = s.config.d2d;
  } else {  // peer: modelled on the destination's inbound (H2D) engine
    engine_device = op.dst.device, engine = kEngineH2D, bandwidth = s.config.peer;
  }
  const bool synchronous = kind == cuda::kMemcpyDeviceToHost && op.dst.place == Place::Pageable;
  if (engine_device < 0) engine_device = -1;
  u64 id = enqueue(s, key, std::move(op), 0, 0, engine_device, engine, bandwidth);
  if (!synchronous) return 0;
  // D2H into pageable memory returns only once the copy is done (and the stream's work before it).
  Error e = complete(s, {id}, 0);
  if (Error sticky = stream_sticky(s, key)) e = sticky;
  return c.ret(e);
}

}  // namespace

STANDIN_EXPORT Error cudaStreamCreateWithFlags(cuda::Stream* stream, unsigned flags) {
  Call c("cudaStreamCreateWithFlags");
  if (Error e = c.begin(kNeedsContext)) return e;
  if (!stream || (flags & ~cuda::kStreamNonBlocking)) return c.ret(cuda::kErrorInvalidValue);
  const u64 handle = new_handle(c.s);
  StreamRec rec;
  rec.device = c.device();
  rec.flags = flags;
  c.s.streams[handle] = rec;
  *stream = reinterpret_cast<cuda::Stream>(handle);
  return 0;
}

STANDIN_EXPORT Error cudaStreamDestroy(cuda::Stream stream) {
  Call c("cudaStreamDestroy");
  if (Error e = c.begin(kNeedsContext)) return e;
  const uptr handle = reinterpret_cast<uptr>(stream);
  if (handle == 0 || handle == 1 || handle == 2) return c.ret(cuda::kErrorInvalidResourceHandle);
  Error bad = 0;
  u64 key = stream_key(c.s, stream, &bad);
  if (!key) return c.ret(bad);
  // Returns at once; work still queued on it runs later (runtime API: cudaStreamDestroy).
  StreamRec& rec = c.s.streams.at(key);
  if (c.s.ops.count(rec.last_op)) rec.destroyed = true;
  else c.s.streams.erase(key);
  return 0;
}

STANDIN_EXPORT Error cudaStreamSynchronize(cuda::Stream stream) {
  Call c("cudaStreamSynchronize");
  if (Error e = c.begin(kNeedsContext)) return e;
  Error bad = 0;
  u64 key = stream_key(c.s, stream, &bad);
  if (!key) return c.ret(bad);
  if (Error sticky = stream_sticky(c.s, key)) return sticky;
  const StreamRec& rec = c.s.streams.at(key);
  Error e = complete(c.s, {rec.last_op}, rec.last_end);
  if (Error sticky = stream_sticky(c.s, key)) e = sticky;
  return c.ret(e);
}

STANDIN_EXPORT Error cudaStreamWaitEvent(cuda::Stream stream, cuda::Event event, unsigned flags) {
  Call c("cudaStreamWaitEvent");
  if (Error e = c.begin(kNeedsContext)) return e;
  Error bad = 0;
  u64 key = stream_key(c.s, stream, &bad);
  if (!key) return c.ret(bad);
  auto ev = c.s.events.find(reinterpret_cast<uptr>(event));
  if (ev == c.s.events.end()) return c.ret(cuda::kErrorInvalidResourceHandle);
  if (flags != 0) return c.ret(cuda::kErrorInvalidValue);
  if (Error sticky = stream_sticky(c.s, key)) return sticky;
  if (!ev->second.recorded) return 0;  // waiting for a never-recorded event is a no-op
  enqueue(c.s, key, Op{}, ev->second.op, ev->second.end, -1, 0, 1);
  return 0;
}

STANDIN_EXPORT Error cudaEventCreateWithFlags(cuda::Event* event, unsigned flags) {
  Call c("cudaEventCreateWithFlags");
  if (Error e = c.begin(kNeedsContext)) return e;
  if (!event || (flags & ~0x7u)) return c.ret(cuda::kErrorInvalidValue);
  const u64 handle = new_handle(c.s);
  EventRec rec;
  rec.device = c.device();
  rec.flags = flags;
  c.s.events[handle] = rec;
  *event = reinterpret_cast<cuda::Event>(handle);
  return 0;
}

STANDIN_EXPORT Error cudaEventDestroy(cuda::Event event) {
  Call c("cudaEventDestroy");
  if (Error e = c.begin(kNeedsContext)) return e;
  // Returns at once even if the recorded work is pending; that work is unaffected.
  if (!c.s.events.erase(reinterpret_cast<uptr>(event))) return c.ret(cuda::kErrorInvalidResourceHandle);
  return 0;
}

STANDIN_EXPORT Error cudaEventRecord(cuda::Event event, cuda::Stream stream) {
  Call c("cudaEventRecord");
  if (Error e = c.begin(kNeedsContext)) return e;
  auto ev = c.s.events.find(reinterpret_cast<uptr>(event));
  if (ev == c.s.events.end()) return c.ret(cuda::kErrorInvalidResourceHandle);
  Error bad = 0;
  u64 key = stream_key(c.s, stream, &bad);
  if (!key) return c.ret(bad);
  if (c.s.streams.at(key).device != ev->second.device) return c.ret(cuda::kErrorInvalidResourceHandle);
  if (Error sticky = stream_sticky(c.s, key)) return sticky;
  const u64 id = enqueue(c.s, key, Op{}, 0, 0, -1, 0, 1);
  ev->second.recorded = true;
  ev->second.op = id;
  ev->second.end = c.s.ops.at(id).end;
  return 0;
}

STANDIN_EXPORT Error cudaEventSynchronize(cuda::Event event) {
  Call c("cudaEventSynchronize");
  if (Error e = c.begin(kNeedsContext)) return e;
  auto ev = c.s.events.find(reinterpret_cast<uptr>(event));
  if (ev == c.s.events.end()) return c.ret(cuda::kErrorInvalidResourceHandle);
  if (!(ev->second.flags & cuda::kEventBlockingSync)) ++c.s.spinning_waits;
  if (!ev->second.recorded) return 0;
  const int device = ev->second.device;
  if (Error sticky = c.s.devices[static_cast<std::size_t>(device)].sticky) return sticky;
  Error e = complete(c.s, {ev->second.op}, ev->second.end);
  if (Error sticky = c.s.devices[static_cast<std::size_t>(device)].sticky) e = sticky;
  return c.ret(e);
}

STANDIN_EXPORT Error cudaMemcpyAsync(void* dst, const void* src, std::size_t count, int kind, cuda::Stream stream) {
  Call c("cudaMemcpyAsync");
  if (Error e = c.begin(kNeedsContext | kDeferInjection)) return e;
  Error bad = 0;
  u64 key = stream_key(c.s, stream, &bad);
  if (!key) return c.ret(bad);
  if (Error sticky = stream_sticky(c.s, key)) return sticky;
  if (kind < cuda::kMemcpyHostToDevice || kind > cuda::kMemcpyDeviceToDevice) return c.ret(cuda::kErrorInvalidValue);
  if (count == 0) return 0;
  if (!dst || !src) return c.ret(cuda::kErrorInvalidValue);
  const bool dst_device = device_of_address(c.s, reinterpret_cast<uptr>(dst)) >= 0;
  const bool src_device = device_of_address(c.s, reinterpret_cast<uptr>(src)) >= 0;
  const bool want_dst = kind != cuda::kMemcpyDeviceToHost, want_src = kind != cuda::kMemcpyHostToDevice;
  if (dst_device != want_dst || src_device != want_src) return c.ret(cuda::kErrorInvalidValue);  // kind mismatch
  return queue_copy(c, key, reinterpret_cast<uptr>(dst), reinterpret_cast<uptr>(src), count, kind, -1, -1,
                    "cudaMemcpyAsync");
}

STANDIN_EXPORT Error cudaMemcpyPeerAsync(void* dst, int dst_device, const void* src, int src_device, std::size_t count,
                                         cuda::Stream stream) {
  Call c("cudaMemcpyPeerAsync");
  if (Error e = c.begin(kNeedsContext | kDeferInjection)) return e;
  Error bad = 0;
  u64 key = stream_key(c.s, stream, &bad);
  if (!key) return c.ret(bad);
  const int n = static_cast<int>(c.s.devices.size());
  if (dst_device < 0 || dst_device >= n || src_device < 0 || src_device >= n) return c.ret(cuda::kErrorInvalidDevice);
  if (Error sticky = stream_sticky(c.s, key)) return sticky;
  if (count == 0) return 0;
  if (!dst || !src || device_of_address(c.s, reinterpret_cast<uptr>(dst)) < 0 ||
      device_of_address(c.s, reinterpret_cast<uptr>(src)) < 0)
    return c.ret(cuda::kErrorInvalidValue);
  return queue_copy(c, key, reinterpret_cast<uptr>(dst), reinterpret_cast<uptr>(src), count,
                    cuda::kMemcpyDeviceToDevice, dst_device, src_device, "cudaMemcpyPeerAsync");
}
