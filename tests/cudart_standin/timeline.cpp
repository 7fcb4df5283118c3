// timeline.cpp - streams, their implicit and explicit ordering, virtual time, lazy execution.
#include "standin_internal.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>

namespace maploc::standin {

u64 stream_key(State& s, cuda::Stream stream, Error* error) {
  const uptr handle = reinterpret_cast<uptr>(stream);
  if (handle == 0 || handle == 0x1) return s.devices[static_cast<std::size_t>(thread_state(s).device)].legacy_stream;
  auto it = s.streams.find(handle);
  if (handle == 0x2 || it == s.streams.end() || it->second.legacy || it->second.destroyed) {
    // cudaStreamPerThread is refused: the stand-in models the legacy default stream only.
    *error = handle == 0x2 ? cuda::kErrorInvalidValue : cuda::kErrorInvalidResourceHandle;
    return 0;
  }
  return handle;
}

namespace {

void depend(const State& s, Op& op, u64& earliest, u64 dep_op, u64 dep_end) {
  earliest = std::max(earliest, dep_end);
  if (dep_op && s.ops.count(dep_op)) op.deps.push_back(dep_op);
}

}  // namespace

u64 enqueue(State& s, u64 stream, Op op, u64 wait_op, u64 wait_end, int engine_device, int engine, double bandwidth) {
  StreamRec& rec = s.streams.at(stream);
  op.id = s.next_op++;
  op.stream = stream;
  op.device = rec.device;
  u64 earliest = s.now;
  depend(s, op, earliest, rec.last_op, rec.last_end);
  depend(s, op, earliest, wait_op, wait_end);
  // Legacy default stream semantics (programming guide, "Implicit Synchronization"): legacy-stream
  // work waits for all earlier work of the device's blocking streams, and blocking-stream work waits
  // for earlier legacy-stream work. Non-blocking streams take part in neither.
  if (rec.legacy) {
    for (auto& [key, other] : s.streams)
      if (!other.legacy && other.device == rec.device && !(other.flags & cuda::kStreamNonBlocking))
        depend(s, op, earliest, other.last_op, other.last_end);
  } else if (!(rec.flags & cuda::kStreamNonBlocking)) {
    const StreamRec& legacy = s.streams.at(s.devices[static_cast<std::size_t>(rec.device)].legacy_stream);
    depend(s, op, earliest, legacy.last_op, legacy.last_end);
  }
  op.start = earliest;
  if (op.kind == OpKind::Copy && engine_device >= 0 && op.bytes > 0) {
    EngineStats& e = s.devices[static_cast<std::size_t>(engine_device)].engines[engine];
    op.start = std::max(earliest, e.free_at);
    const u64 duration = std::max<u64>(1, static_cast<u64>(std::ceil(static_cast<double>(op.bytes) * 1e9 / bandwidth)));
    op.end = op.start + duration;
    e.free_at = op.end;
    e.busy += duration;
    e.first_start = std::min(e.first_start, op.start);
    e.last_end = std::max(e.last_end, op.end);
  } else if (op.kind == OpKind::Fill) {
    op.end = op.start + op.end;  // a fill arrives with its duration in op.end
  } else {
    op.end = op.start;
  }
  rec.last_op = op.id;
  rec.last_end = op.end;
  const u64 id = op.id;
  s.ops.emplace(id, std::move(op));
  // Destroyed streams whose work has all run are forgotten.
  for (auto it = s.streams.begin(); it != s.streams.end();)
    it = it->second.destroyed && !s.ops.count(it->second.last_op) ? s.streams.erase(it) : std::next(it);
  return id;
}

namespace {

bool still_live(State& s, const Op& op, const Endpoint& e, const char* role) {
  if (e.place != Place::Device) return true;
  const Allocation* a = allocation_containing(s, e.addr);
  if (a && a->id == e.alloc_id) return true;
  add_violation(s, op.what + ": the " + role + " allocation was freed before the copy ran");
  return false;
}

// Executes one op; returns the error it fails with (0 if none).
Error execute(State& s, Op& op) {
  Device& device = s.devices[static_cast<std::size_t>(op.device)];
  if (device.sticky) return 0;  // a dead context runs nothing more
  if (op.fail) {
    device.sticky = op.fail;
    return op.fail;
  }
  if (!still_live(s, op, op.dst, "destination") || !still_live(s, op, op.src, "source")) {
    device.sticky = kErrorIllegalAddress;
    return kErrorIllegalAddress;
  }
  auto host = [&](const Endpoint& e) -> unsigned char* {
    return e.place == Place::Device ? shadow_of(s, e.addr) : reinterpret_cast<unsigned char*>(e.addr);
  };
  if (op.kind == OpKind::Fill) {
    std::memset(host(op.dst), op.fill_value, op.bytes);
  } else if (op.kind == OpKind::Copy && op.bytes > 0) {
    const unsigned char* from = op.has_snapshot ? op.snapshot.data() : host(op.src);
    if (op.check_source && checksum(from, op.bytes) != op.checksum)
      add_violation(s, op.what + ": pinned source " + describe(reinterpret_cast<void*>(op.src.addr)) +
                           " rewritten before the copy that reads it ran");
    std::memmove(host(op.dst), from, op.bytes);
  }
  return 0;
}

}  // namespace

Error complete(State& s, const std::vector<u64>& targets, u64 wait_until) {
  std::set<u64> closure;
  std::vector<u64> frontier(targets);
  while (!frontier.empty()) {
    u64 id = frontier.back();
    frontier.pop_back();
    auto it = s.ops.find(id);
    if (it == s.ops.end() || !closure.insert(id).second) continue;
    for (u64 dep : it->second.deps) frontier.push_back(dep);
  }
  // Effects land in completion order: (end, id) is a topological order, as every op ends no
  // earlier than its predecessors and ids grow with enqueue order.
  std::vector<Op*> order;
  for (u64 id : closure) order.push_back(&s.ops.at(id));
  std::sort(order.begin(), order.end(),
            [](const Op* a, const Op* b) { return a->end != b->end ? a->end < b->end : a->id < b->id; });
  Error first = 0;
  for (Op* op : order) {
    Error e = execute(s, *op);
    if (e && !first) first = e;
    wait_until = std::max(wait_until, op->end);
  }
  for (u64 id : closure) s.ops.erase(id);
  s.now = std::max(s.now, wait_until);
  return first;
}

Error complete_device(State& s, int device) {
  std::vector<u64> targets;
  for (auto& [id, op] : s.ops)
    if (op.device == device) targets.push_back(id);
  return complete(s, targets, 0);
}

Error complete_all(State& s) {
  std::vector<u64> targets;
  for (auto& [id, op] : s.ops) targets.push_back(id);
  return complete(s, targets, 0);
}

}  // namespace maploc::standin
