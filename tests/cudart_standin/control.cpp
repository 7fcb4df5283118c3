// control.cpp - the maploc_standin_* control API tests use, and the report at process exit.
#include "standin_internal.h"

#include <unistd.h>

#include <cstdio>
#include <cstring>

using namespace maploc::standin;
namespace cuda = maploc::remap::cuda;

namespace {

struct Locked {
  State& s;
  std::lock_guard<std::mutex> lock;
  Locked() : s(state()), lock(s.mu) { ensure_initialised(s); }
};

const char* keep(std::string text) {
  thread_local std::string kept;
  kept = std::move(text);
  return kept.c_str();
}

bool valid(const State& s, int device) { return device >= 0 && device < static_cast<int>(s.devices.size()); }

// What is live, by name; -1 for an unknown name. healthy_only: leave out what belongs to a device
// whose context died of a sticky error (lost with it: a real process can only exit then).
long long live(const State& s, const std::string& what, bool healthy_only = false) {
  auto counts = [&](int device) {
    return !healthy_only || !s.devices[static_cast<std::size_t>(device)].sticky;
  };
  long long n = 0;
  if (what == "device_allocations" || what == "device_bytes") {
    for (auto& [base, a] : s.allocations)
      if (counts(a.device)) n += what == "device_bytes" ? static_cast<long long>(a.size) : 1;
  } else if (what == "pinned_buffers") {
    n = static_cast<long long>(s.pinned.size());
  } else if (what == "streams") {
    for (auto& [key, rec] : s.streams) n += !rec.legacy && !rec.destroyed && counts(rec.device);
  } else if (what == "events") {
    for (auto& [key, rec] : s.events) n += counts(rec.device);
  } else if (what == "pending_ops") {
    for (auto& [id, op] : s.ops) n += counts(op.device);
  } else {
    return -1;
  }
  return n;
}

// Everything live that must not outlive a configuration (pinned buffers may: they are host memory).
std::string live_report(const State& s) {
  std::string text;
  for (const char* what : {"device_allocations", "device_bytes", "streams", "events", "pending_ops"})
    if (long long n = live(s, what, true))
      text += std::string(text.empty() ? "" : ", ") + what + "=" + std::to_string(n);
  return text;
}

const EngineStats* engine(const State& s, int device, int dir) {
  if (!valid(s, device) || dir < 0 || dir >= kEngines) return nullptr;
  return &s.devices[static_cast<std::size_t>(device)].engines[dir];
}

__attribute__((destructor)) void report_at_exit() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!s.initialised) return;
  std::string text = live_report(s);
  const std::string pinned = s.pinned.empty() ? "" : " (pinned_buffers=" + std::to_string(s.pinned.size()) + ")";
  if (text.empty() && s.violations.empty()) {
    if (!pinned.empty()) std::fprintf(stderr, "maploc cudart stand-in at exit: pinned buffers live%s\n", pinned.c_str());
    return;
  }
  if (!s.violations.empty())
    text += std::string(text.empty() ? "" : "; ") + std::to_string(s.violations.size()) +
            " unacknowledged violation(s), first: " + s.violations.front();
  std::fprintf(stderr, "maploc cudart stand-in at exit: %s%s\n", text.c_str(), pinned.c_str());
  std::fflush(stderr);
  ::_exit(86);
}

}  // namespace

STANDIN_EXPORT int maploc_standin_configure(const char* spec) {
  Locked l;
  Config config;
  std::string message;
  std::string busy = live_report(l.s);
  if (!busy.empty()) {
    l.s.message = "maploc_standin_configure: still live: " + busy;
    return 1;
  }
  if (!parse_config(spec, config, message) || !apply_config(l.s, config, message)) {
    l.s.message = message;
    return 1;
  }
  l.s.message.clear();
  return 0;
}

STANDIN_EXPORT const char* maploc_standin_last_message() {
  Locked l;
  return keep(l.s.message);
}

STANDIN_EXPORT int maploc_standin_contexts_created(int device) {
  Locked l;
  return valid(l.s, device) ? l.s.devices[static_cast<std::size_t>(device)].contexts_created : -1;
}

STANDIN_EXPORT int maploc_standin_context_active(int device) {
  Locked l;
  return valid(l.s, device) && l.s.devices[static_cast<std::size_t>(device)].active ? 1 : 0;
}

STANDIN_EXPORT int maploc_standin_device_bytes(const void* device_ptr, void* out, std::size_t n) {
  Locked l;
  if (!check_device_range(l.s, reinterpret_cast<uptr>(device_ptr), n, nullptr).empty() || (n && !out)) return 1;
  if (n) std::memcpy(out, shadow_of(l.s, reinterpret_cast<uptr>(device_ptr)), n);
  return 0;
}

STANDIN_EXPORT int maploc_standin_write_device(void* device_ptr, const void* src, std::size_t n) {
  Locked l;
  if (!check_device_range(l.s, reinterpret_cast<uptr>(device_ptr), n, nullptr).empty() || (n && !src)) return 1;
  if (n) std::memcpy(shadow_of(l.s, reinterpret_cast<uptr>(device_ptr)), src, n);
  return 0;
}

STANDIN_EXPORT int maploc_standin_protect(const void* device_ptr, std::size_t n) {
  Locked l;
  if (!check_device_range(l.s, reinterpret_cast<uptr>(device_ptr), n, nullptr).empty()) return 1;
  l.s.protected_ranges.emplace_back(reinterpret_cast<uptr>(device_ptr), n);
  return 0;
}

STANDIN_EXPORT std::size_t maploc_standin_violations() {
  Locked l;
  return l.s.violations.size();
}

STANDIN_EXPORT const char* maploc_standin_violation_text(std::size_t i) {
  Locked l;
  return keep(i < l.s.violations.size() ? l.s.violations[i] : std::string());
}

STANDIN_EXPORT void maploc_standin_acknowledge_violations() {
  Locked l;
  l.s.violations.clear();
}

STANDIN_EXPORT unsigned long long maploc_standin_spinning_waits() {
  Locked l;
  return l.s.spinning_waits;
}

STANDIN_EXPORT unsigned long long maploc_standin_now_ns() {
  Locked l;
  return l.s.now;
}

STANDIN_EXPORT unsigned long long maploc_standin_engine_busy_ns(int device, int dir) {
  Locked l;
  const EngineStats* e = engine(l.s, device, dir);
  return e ? e->busy : 0;
}

STANDIN_EXPORT unsigned long long maploc_standin_engine_first_start_ns(int device, int dir) {
  Locked l;
  const EngineStats* e = engine(l.s, device, dir);
  return e && e->busy ? e->first_start : 0;
}

STANDIN_EXPORT unsigned long long maploc_standin_engine_last_end_ns(int device, int dir) {
  Locked l;
  const EngineStats* e = engine(l.s, device, dir);
  return e ? e->last_end : 0;
}

STANDIN_EXPORT void maploc_standin_reset_clock_stats() {
  Locked l;
  for (Device& d : l.s.devices)
    for (EngineStats& e : d.engines) e = EngineStats{0, UINT64_MAX, 0, e.free_at};
}

STANDIN_EXPORT int maploc_standin_enqueue_fill(void* device_ptr, int value, std::size_t n, void* stream,
                                               unsigned long long duration_ns) {
  Locked l;
  State& s = l.s;
  if (!s.init_error.empty() || s.config.nodevice) return cuda::kErrorNoDevice;
  const Allocation* a = nullptr;
  if (!check_device_range(s, reinterpret_cast<uptr>(device_ptr), n, &a).empty()) return cuda::kErrorInvalidValue;
  Error bad = 0;
  u64 key = stream_key(s, static_cast<cuda::Stream>(stream), &bad);
  if (!key) return bad;
  create_context(s, thread_state(s).device);
  Op op;
  op.kind = OpKind::Fill;
  op.dst = Endpoint{Place::Device, reinterpret_cast<uptr>(device_ptr), a->id, a->device};
  op.bytes = n;
  op.fill_value = value;
  op.end = duration_ns;
  op.what = "fill(" + describe(device_ptr) + ", " + std::to_string(n) + " bytes)";
  enqueue(s, key, std::move(op), 0, 0, -1, 0, 1);
  return 0;
}

STANDIN_EXPORT int maploc_standin_synchronize_all() {
  Locked l;
  Error e = complete_all(l.s);
  for (const Device& d : l.s.devices)
    if (!e && d.sticky) e = d.sticky;
  return e;
}

STANDIN_EXPORT int maploc_standin_fail(const char* entry_point, int nth, int error) {
  static const char* const kEntryPoints[] = {
      "cudaRuntimeGetVersion", "cudaDriverGetVersion", "cudaGetDeviceCount", "cudaGetDevice", "cudaSetDevice",
      "cudaMemGetInfo", "cudaMalloc", "cudaFree", "cudaHostAlloc", "cudaFreeHost", "cudaStreamCreateWithFlags",
      "cudaStreamDestroy", "cudaStreamSynchronize", "cudaStreamWaitEvent", "cudaEventCreateWithFlags",
      "cudaEventDestroy", "cudaEventRecord", "cudaEventSynchronize", "cudaMemcpyAsync", "cudaMemcpyPeerAsync",
      "cudaDeviceCanAccessPeer", "cudaDeviceEnablePeerAccess", "cudaPointerGetAttributes", "cuInit", "cuDeviceGet",
      "cuDevicePrimaryCtxGetState"};
  Locked l;
  bool known = false;
  for (const char* name : kEntryPoints) known = known || (entry_point && std::strcmp(name, entry_point) == 0);
  if (!known || nth < 1 || error == 0) {
    l.s.message = "maploc_standin_fail: unknown entry point or bad arguments";
    return 1;
  }
  const u64 at = l.s.calls[entry_point] + static_cast<u64>(nth);
  l.s.injections[entry_point][at] = error;
  return 0;
}

STANDIN_EXPORT unsigned long long maploc_standin_calls(const char* entry_point) {
  Locked l;
  auto it = entry_point ? l.s.calls.find(entry_point) : l.s.calls.end();
  return it == l.s.calls.end() ? 0 : it->second;
}

STANDIN_EXPORT long long maploc_standin_live(const char* what) {
  Locked l;
  return what ? live(l.s, what) : -1;
}
