// simulated_backend.cpp - the simulated device: host memory as device memory, a worker thread
// carrying out queued copies late and piece by piece, injected failures, accounting.
#include "simulated_backend.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace maploc::remap::detail {
namespace {

constexpr std::uint64_t kAlignment = 256;  // cudaMalloc's guarantee

}  // namespace

SimulatedBackend::SimulatedBackend(Options options)
    : options_(std::move(options)), used_(options_.capacities.size(), 0), worker_([this] { work(); }) {}

SimulatedBackend::~SimulatedBackend() {
  release_staging();
  {
    const std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  worker_.join();
  for (const auto& [address, block] : blocks_) std::free(reinterpret_cast<void*>(address));
}

void SimulatedBackend::fail_allocation(std::size_t nth) {
  const std::lock_guard lock(mutex_);
  fail_allocation_at_ = nth;
}

void SimulatedBackend::fail_copy(std::size_t nth) {
  const std::lock_guard lock(mutex_);
  fail_copy_at_ = nth;
}

SimulatedBackend::Live SimulatedBackend::live() const {
  const std::lock_guard lock(mutex_);
  Live out;
  for (const auto& [address, block] : blocks_) {
    if (block.device < 0) {
      ++out.pinned_buffers;
    } else {
      ++out.device_allocations;
      out.device_bytes += block.size;
    }
  }
  out.streams = streams_.size();
  out.events = events_.size();
  return out;
}

SimulatedBackend::Counts SimulatedBackend::counts() const {
  const std::lock_guard lock(mutex_);
  return counts_;
}

int SimulatedBackend::current_device() const {
  const std::lock_guard lock(mutex_);
  const auto it = current_.find(std::this_thread::get_id());
  return it == current_.end() ? 0 : it->second;
}

int SimulatedBackend::device_count() { return static_cast<int>(options_.capacities.size()); }

int& SimulatedBackend::current_locked() { return current_.try_emplace(std::this_thread::get_id(), 0).first->second; }

SimulatedBackend::Status SimulatedBackend::get_device(int* device) {
  const std::lock_guard lock(mutex_);
  *device = current_locked();
  return 0;
}

SimulatedBackend::Status SimulatedBackend::set_device(int device) {
  if (device < 0 || device >= device_count()) return kInvalidDevice;
  const std::lock_guard lock(mutex_);
  current_locked() = device;
  return 0;
}

SimulatedBackend::Status SimulatedBackend::mem_info(std::uint64_t* free, std::uint64_t* total) {
  const std::lock_guard lock(mutex_);
  const auto d = static_cast<std::size_t>(current_locked());
  if (d >= used_.size()) return kInvalidDevice;
  *total = options_.capacities[d];
  *free = options_.capacities[d] - used_[d];
  return 0;
}

SimulatedBackend::Status SimulatedBackend::allocate_locked(void** p, std::uint64_t n, int device) {
  *p = nullptr;
  if (n == 0) return 0;
  if (fail_allocation_at_ > 0 && --fail_allocation_at_ == 0) return kInjectedAllocation;
  if (device >= 0) {
    const auto d = static_cast<std::size_t>(device);
    if (d >= used_.size()) return kInvalidDevice;
    if (n > options_.capacities[d] - used_[d]) return kOutOfMemory;
  }
  if (n > (std::uint64_t{1} << 46)) return kOutOfMemory;
  void* q = std::aligned_alloc(kAlignment, static_cast<std::size_t>((n + kAlignment - 1) / kAlignment * kAlignment));
  if (q == nullptr) return kOutOfMemory;
  blocks_.emplace(reinterpret_cast<std::uintptr_t>(q), Block{n, device});
  if (device >= 0) {
    used_[static_cast<std::size_t>(device)] += n;
    ++counts_.device_allocations;
  } else {
    ++counts_.pinned_allocations;
  }
  *p = q;
  return 0;
}

SimulatedBackend::Status SimulatedBackend::device_alloc(void** p, std::uint64_t n) {
  const std::lock_guard lock(mutex_);
  return allocate_locked(p, n, current_locked());
}

SimulatedBackend::Status SimulatedBackend::pinned_alloc(void** p, std::uint64_t n) {
  const std::lock_guard lock(mutex_);
  return allocate_locked(p, n, -1);
}

SimulatedBackend::Status SimulatedBackend::device_free(void* p) {
  if (p == nullptr) return 0;
  const std::lock_guard lock(mutex_);
  const auto it = blocks_.find(reinterpret_cast<std::uintptr_t>(p));
  if (it == blocks_.end() || it->second.device < 0) return kInvalidValue;
  used_[static_cast<std::size_t>(it->second.device)] -= it->second.size;
  blocks_.erase(it);
  std::free(p);
  return 0;
}

SimulatedBackend::Status SimulatedBackend::pinned_free(void* p) {
  if (p == nullptr) return 0;
  const std::lock_guard lock(mutex_);
  const auto it = blocks_.find(reinterpret_cast<std::uintptr_t>(p));
  if (it == blocks_.end() || it->second.device >= 0) return kInvalidValue;
  blocks_.erase(it);
  std::free(p);
  return 0;
}

SimulatedBackend::Status SimulatedBackend::stream_create(Stream* s) {
  const std::lock_guard lock(mutex_);
  streams_.push_back(std::make_unique<StreamState>(StreamState{current_locked(), {}, 0, 0, 0, 0}));
  *s = streams_.back().get();
  return 0;
}

SimulatedBackend::StreamState* SimulatedBackend::stream_of(Stream s) {
  for (const auto& p : streams_) {
    if (p.get() == s) return p.get();
  }
  return nullptr;
}

SimulatedBackend::Status SimulatedBackend::stream_destroy(Stream s) {
  std::unique_lock lock(mutex_);
  StreamState* stream = stream_of(s);
  if (stream == nullptr) return kInvalidHandle;
  wait_locked(lock, stream, stream->enqueued);  // CUDA lets queued work finish first
  for (auto& e : events_) {
    if (e->stream == stream) e->stream = nullptr;
  }
  std::erase_if(streams_, [&](const auto& p) { return p.get() == stream; });
  return 0;
}

SimulatedBackend::Status SimulatedBackend::wait_locked(std::unique_lock<std::mutex>& lock, StreamState* stream,
                                                       std::uint64_t upto) {
  stream->wanted = std::max(stream->wanted, upto);
  wake_.notify_all();
  done_.wait(lock, [&] { return stream->executed >= upto; });
  return stream->failed_at != 0 && stream->failed_at <= upto ? kInjectedCopy : 0;
}

SimulatedBackend::Status SimulatedBackend::stream_sync(Stream s) {
  std::unique_lock lock(mutex_);
  StreamState* stream = stream_of(s);
  if (stream == nullptr) return kInvalidHandle;
  return wait_locked(lock, stream, stream->enqueued);
}

SimulatedBackend::Status SimulatedBackend::event_create(Event* e) {
  const std::lock_guard lock(mutex_);
  events_.push_back(std::make_unique<EventState>(EventState{current_locked(), nullptr, 0}));
  *e = events_.back().get();
  return 0;
}

SimulatedBackend::Status SimulatedBackend::event_destroy(Event e) {
  const std::lock_guard lock(mutex_);
  const auto before = events_.size();
  std::erase_if(events_, [&](const auto& p) { return p.get() == e; });
  return events_.size() == before ? kInvalidHandle : 0;
}

SimulatedBackend::Status SimulatedBackend::context_active(int device, bool* active) {
  *active = true;  // the simulator has no contexts: restoring a device costs nothing
  return device < 0 || device >= device_count() ? kInvalidDevice : 0;
}

SimulatedBackend::Status SimulatedBackend::event_record(Event e, Stream s) {
  const std::lock_guard lock(mutex_);
  auto* event = static_cast<EventState*>(e);
  if (std::none_of(events_.begin(), events_.end(), [&](const auto& p) { return p.get() == e; })) return kInvalidHandle;
  if (s == nullptr) {  // the default stream: nothing of a caller's is ever queued there
    event->stream = nullptr;
    event->at = 0;
    return 0;
  }
  StreamState* stream = stream_of(s);
  if (stream == nullptr) return kInvalidHandle;
  if (event->device != stream->device) return kInvalidHandle;  // as CUDA: event and stream of one device
  event->stream = stream;
  event->at = stream->enqueued;
  return 0;
}

SimulatedBackend::Status SimulatedBackend::event_sync(Event e) {
  std::unique_lock lock(mutex_);
  if (std::none_of(events_.begin(), events_.end(), [&](const auto& p) { return p.get() == e; })) {
    return kInvalidHandle;
  }
  auto* event = static_cast<EventState*>(e);
  if (event->stream == nullptr) return 0;  // never recorded, or its stream finished and went
  return wait_locked(lock, event->stream, event->at);
}

SimulatedBackend::Status SimulatedBackend::stream_wait_event(Stream s, Event e) {
  std::unique_lock lock(mutex_);
  if (stream_of(s) == nullptr ||
      std::none_of(events_.begin(), events_.end(), [&](const auto& p) { return p.get() == e; })) {
    return kInvalidHandle;
  }
  // Stronger than CUDA (the host waits, not only the stream): the same order, and the simulator
  // has no other work that could be held up.
  auto* event = static_cast<EventState*>(e);
  return event->stream == nullptr ? 0 : wait_locked(lock, event->stream, event->at);
}

const SimulatedBackend::Block* SimulatedBackend::find_locked(const void* p, std::uint64_t n, int device) const {
  const auto address = reinterpret_cast<std::uintptr_t>(p);
  auto it = blocks_.upper_bound(address);
  if (it == blocks_.begin()) return nullptr;
  --it;
  if (address - it->first >= std::max<std::uint64_t>(it->second.size, 1) || n > it->second.size - (address - it->first)) {
    return nullptr;
  }
  if (device != -2 && it->second.device != device) return nullptr;
  return &it->second;
}

SimulatedBackend::Status SimulatedBackend::enqueue_locked(void* dst, const void* src, std::uint64_t n,
                                                          StreamState* stream) {
  Copy copy{static_cast<std::uint8_t*>(dst), static_cast<const std::uint8_t*>(src), n};
  if (fail_copy_at_ > 0 && --fail_copy_at_ == 0) copy.fail = true;
  stream->queue.push_back(copy);
  ++stream->enqueued;
  if (options_.max_queued != 0 && stream->queue.size() >= options_.max_queued) wake_.notify_all();
  return 0;
}

SimulatedBackend::Status SimulatedBackend::copy_async(void* dst, const void* src, std::uint64_t n, CopyKind kind,
                                                      Stream s) {
  const std::lock_guard lock(mutex_);
  StreamState* stream = stream_of(s);
  if (stream == nullptr) return kInvalidHandle;
  const auto is_device = [&](const void* p) {
    const Block* b = find_locked(p, 1, -2);
    return b != nullptr && b->device >= 0;
  };
  switch (kind) {
    case CopyKind::kHostToDevice:
      if (find_locked(dst, n, stream->device) == nullptr || is_device(src)) return kInvalidValue;
      ++counts_.host_to_device;
      counts_.bytes_to_device += n;
      break;
    case CopyKind::kDeviceToHost:
      if (find_locked(src, n, stream->device) == nullptr || is_device(dst)) return kInvalidValue;
      ++counts_.device_to_host;
      break;
    case CopyKind::kDeviceToDevice:
      if (find_locked(src, n, stream->device) == nullptr || find_locked(dst, n, stream->device) == nullptr) {
        return kInvalidValue;
      }
      ++counts_.device_to_device;
      break;
  }
  return n == 0 ? 0 : enqueue_locked(dst, src, n, stream);
}

SimulatedBackend::Status SimulatedBackend::copy_peer_async(void* dst, int dst_device, const void* src, int src_device,
                                                           std::uint64_t n, Stream s) {
  const std::lock_guard lock(mutex_);
  StreamState* stream = stream_of(s);
  if (stream == nullptr) return kInvalidHandle;
  if (find_locked(dst, n, dst_device) == nullptr || find_locked(src, n, src_device) == nullptr) return kInvalidValue;
  ++counts_.peer;
  return n == 0 ? 0 : enqueue_locked(dst, src, n, stream);
}

SimulatedBackend::Status SimulatedBackend::pointer_info(const void* p, PointerInfo* info) {
  const std::lock_guard lock(mutex_);
  const Block* b = find_locked(p, 1, -2);
  info->device = b != nullptr ? b->device : -1;
  info->kind = b == nullptr ? PointerKind::kHost : b->device < 0 ? PointerKind::kPinnedHost : PointerKind::kDevice;
  return 0;
}

std::string SimulatedBackend::error_text(Status status) {
  switch (status) {
    case 0: return "no error";
    case kInvalidValue: return "simulated: invalid argument (a copy outside an allocation, or of the wrong kind)";
    case kOutOfMemory: return "simulated: out of memory";
    case kInvalidDevice: return "simulated: invalid device ordinal";
    case kInvalidHandle: return "simulated: invalid stream or event";
    case kInjectedCopy: return "simulated: injected copy failure";
    case kInjectedAllocation: return "simulated: injected allocation failure";
  }
  return "simulated: error " + std::to_string(status);
}

void SimulatedBackend::work() {
  std::unique_lock lock(mutex_);
  std::size_t turn = 0;
  for (;;) {
    // A stream that someone waits for, or whose queue is full: round robin.
    StreamState* stream = nullptr;
    for (std::size_t k = 0; k < streams_.size() && stream == nullptr; ++k) {
      StreamState* s = streams_[(turn + k) % streams_.size()].get();
      const bool full = options_.max_queued != 0 && s->queue.size() >= options_.max_queued;
      if (!s->queue.empty() && (s->wanted > s->executed || full)) stream = s;
    }
    if (stream == nullptr) {
      if (stop_) return;
      wake_.wait(lock);
      continue;
    }
    ++turn;
    Copy& copy = stream->queue.front();
    if (copy.fail && stream->failed_at == 0) stream->failed_at = stream->executed + 1;
    if (stream->failed_at == 0) {  // after a failure the stream does nothing more (a sticky error)
      const std::uint64_t n = std::min(options_.piece_bytes, copy.n - copy.done);
      std::memcpy(copy.dst + copy.done, copy.src + copy.done, static_cast<std::size_t>(n));
      copy.done += n;
    }
    if (stream->failed_at != 0 || copy.done == copy.n) {
      stream->queue.pop_front();
      ++stream->executed;
      done_.notify_all();
    }
    // Between pieces the host threads run: a buffer refilled too early changes what is copied.
    lock.unlock();
    std::this_thread::yield();
    lock.lock();
  }
}

}  // namespace maploc::remap::detail
