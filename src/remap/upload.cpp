// upload.cpp - the host-to-device pipeline: long-lived reader threads pread the file into a reused
// pinned staging ring while the copy engine drains it (loading-performance-and-security.md A.9, A.12).
#include "upload.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <new>
#include <optional>
#include <system_error>
#include <thread>
#include <vector>

#include "maploc/error.h"
#include "support/byteswap.h"

namespace maploc::remap::detail {
namespace {

// Largest piece one reader handles at once; pieces of file-backed jobs end
// on multiples of it in the file, so reads are large and aligned.
constexpr std::uint64_t kReadPiece = std::uint64_t{4} << 20;
// Neighbouring arena storages closer than this are sent in one transfer.
constexpr std::uint64_t kMaxCoalesceGap = 4096;

// One reader's piece of work: n bytes of a job at src_off into the staging buffer.
struct Op {
  std::uint64_t staging_off;
  std::size_t job;
  std::uint64_t src_off;
  std::uint64_t n;
};

// One copy out of a staging buffer.
struct Transfer {
  std::uint64_t staging_off;
  std::uint8_t* dst;
  std::uint64_t n;
  std::size_t job;  // its first job, for messages
};

// What one staging buffer carries to one device.
struct Batch {
  int device = 0;
  std::vector<Op> ops;
  std::vector<Transfer> transfers;
  std::uint64_t used = 0;
  std::uint64_t staged = 0;  // payload bytes (without coalescing gaps), for progress
  std::size_t first_job = SIZE_MAX;
  std::size_t last_job = SIZE_MAX;
  std::size_t jobs = 0;  // storages with bytes in this batch
};

// Cuts [begin, end) of a job into reader pieces; a file-backed job's pieces
// end on kReadPiece boundaries of the file, never inside an element.
void add_ops(Batch& b, const UploadJob& job, std::size_t j, std::uint64_t at, std::uint64_t begin, std::uint64_t end) {
  const std::uint64_t unit = std::max<std::size_t>(job.swap_unit, 1);
  for (std::uint64_t p = begin; p < end;) {
    std::uint64_t stop = std::min(end, p + kReadPiece);
    if (job.file_offset >= 0 && stop < end) {
      const auto file = static_cast<std::uint64_t>(job.file_offset);
      std::uint64_t aligned = (file + stop) / kReadPiece * kReadPiece - file;
      aligned -= aligned % unit;
      if (aligned > p) stop = aligned;
    }
    b.ops.push_back({at + (p - begin), j, p, stop - p});
    p = stop;
  }
}

// Packs one device's jobs into staging-buffer batches: large jobs cut into
// buffer-sized pieces (never splitting an element), small ones sharing a
// buffer; with `coalesce` (arena placement, where the gaps between storages
// are padding) neighbouring destinations become one transfer.
std::vector<Batch> pack(std::span<const UploadJob> jobs, const std::vector<std::size_t>& order, int device,
                        std::uint64_t capacity, bool coalesce) {
  std::vector<Batch> batches(1);
  batches.back().device = device;
  for (std::size_t j : order) {
    const UploadJob& job = jobs[j];
    auto* const dst = static_cast<std::uint8_t*>(job.dst);
    const std::uint64_t unit = std::max<std::size_t>(job.swap_unit, 1);
    for (std::uint64_t done = 0; done < job.size();) {
      Batch* b = &batches.back();
      std::uint64_t gap = 0;
      bool extend = false;
      if (coalesce && !b->transfers.empty()) {
        const Transfer& last = b->transfers.back();
        const std::uint8_t* end = last.dst + last.n;
        if (dst + done >= end && static_cast<std::uint64_t>(dst + done - end) <= kMaxCoalesceGap &&
            b->used + static_cast<std::uint64_t>(dst + done - end) < capacity) {
          gap = static_cast<std::uint64_t>(dst + done - end);
          extend = true;
        }
      }
      const std::uint64_t room = b->used + gap < capacity ? capacity - b->used - gap : 0;
      std::uint64_t n = std::min<std::uint64_t>(job.size() - done, room);
      n -= n % unit;
      if (n == 0) {  // this buffer is full: the next one
        batches.emplace_back().device = device;
        continue;
      }
      const std::uint64_t at = b->used + gap;
      add_ops(*b, job, j, at, done, done + n);
      if (extend) {
        b->transfers.back().n += gap + n;
      } else {
        b->transfers.push_back({at, dst + done, n, j});
      }
      if (b->first_job == SIZE_MAX) b->first_job = j;
      if (b->last_job != j) ++b->jobs;
      b->last_job = j;
      b->used = at + n;
      b->staged += n;
      done += n;
    }
  }
  if (batches.back().transfers.empty()) batches.pop_back();
  return batches;
}

// Pinned staging buffers, made once and kept by the backend between uploads.
class Ring {
 public:
  Ring(DeviceBackend& backend, std::size_t count, std::uint64_t bytes) : backend_(backend), bytes_(bytes) {
    buffers_.reserve(count);
    try {
      for (std::size_t i = 0; i < count; ++i) {
        void* p = nullptr;
        check_device(backend, backend.pinned_alloc(&p, bytes),
                     "allocating a pinned staging buffer of " + std::to_string(bytes) + " bytes");
        buffers_.push_back(static_cast<std::uint8_t*>(p));
      }
    } catch (const Error&) {
      release();  // a constructor that fails frees what it made
      throw;
    }
  }
  ~Ring() { release(); }
  Ring(const Ring&) = delete;
  Ring& operator=(const Ring&) = delete;
  std::size_t size() const { return buffers_.size(); }
  std::uint64_t bytes() const { return bytes_; }
  std::uint8_t* buffer(std::size_t i) const { return buffers_[i]; }

 private:
  void release() noexcept {
    for (auto* p : buffers_) backend_.pinned_free(p);
    buffers_.clear();
  }

  DeviceBackend& backend_;
  std::uint64_t bytes_;
  std::vector<std::uint8_t*> buffers_;
};

}  // namespace

// The backend's one cached ring: taken by an upload, given back after it
// (a second upload at the same time makes its own, freed after).
class StagingCache {
 public:
  StagingCache(DeviceBackend& backend, std::size_t count, std::uint64_t bytes) : backend_(backend) {
    {
      const std::lock_guard lock(backend.staging_mutex_);
      auto cached = std::static_pointer_cast<Ring>(std::move(backend.staging_));
      backend.staging_.reset();
      if (cached && cached->size() == count && cached->bytes() == bytes) ring_ = std::move(cached);
    }
    if (!ring_) ring_ = std::make_shared<Ring>(backend, count, bytes);
  }
  ~StagingCache() {
    std::shared_ptr<void> surplus;
    const std::lock_guard lock(backend_.staging_mutex_);
    if (backend_.staging_) surplus = std::move(ring_);
    else backend_.staging_ = std::move(ring_);
  }
  StagingCache(const StagingCache&) = delete;
  StagingCache& operator=(const StagingCache&) = delete;
  const Ring& ring() const { return *ring_; }

 private:
  DeviceBackend& backend_;
  std::shared_ptr<Ring> ring_;
};

namespace {

// Per device: a stream and one event per staging buffer. On the way out
// every stream is drained (so no copy still reads staging or writes a
// destination that is about to be freed) and everything is destroyed.
class Lanes {
 public:
  Lanes(DeviceBackend& backend, const std::vector<int>& devices, std::size_t buffers, const CudaOptions& options)
      : backend_(backend) {
    try {
      make(devices, buffers, options);
    } catch (const Error&) {
      release();  // a constructor that fails frees what it made
      throw;
    }
  }
  ~Lanes() { release(); }
  Lanes(const Lanes&) = delete;
  Lanes& operator=(const Lanes&) = delete;

  struct Lane {
    int device = 0;
    DeviceBackend::Stream stream = nullptr;
    std::vector<DeviceBackend::Event> events;
  };
  Lane& of(int device) {
    return *std::find_if(lanes_.begin(), lanes_.end(), [&](const Lane& l) { return l.device == device; });
  }

 private:
  void make(const std::vector<int>& devices, std::size_t buffers, const CudaOptions& options) {
    DeviceBackend& backend = backend_;
    for (int d : devices) {
      const std::string where = "cuda:" + std::to_string(d);
      Lane& lane = lanes_.emplace_back();
      lane.device = d;
      check_device(backend, backend.set_device(d), "selecting " + where);
      check_device(backend, backend.stream_create(&lane.stream), "creating a copy stream on " + where);
      order_after_caller(backend, d, lane.stream, options);
      for (std::size_t k = 0; k < buffers; ++k) {
        DeviceBackend::Event e = nullptr;
        check_device(backend, backend.event_create(&e), "creating a copy event on " + where);
        lane.events.push_back(e);
      }
    }
  }
  void release() noexcept {
    for (auto& lane : lanes_) {
      if (lane.stream != nullptr) backend_.stream_sync(lane.stream);
      for (auto e : lane.events) backend_.event_destroy(e);
      if (lane.stream != nullptr) backend_.stream_destroy(lane.stream);
    }
    lanes_.clear();
  }

  DeviceBackend& backend_;
  std::deque<Lane> lanes_;
};

// The reader threads and the batches open to them. A batch is published
// with its buffer; readers take its pieces in order; the submitter waits
// until all are done. The first error stops everything.
class Readers {
 public:
  Readers(std::span<const UploadJob> jobs, const std::vector<Batch>& batches, int fd, unsigned threads)
      : jobs_(jobs), batches_(batches), fd_(fd), remaining_(batches.size(), 0), next_(batches.size(), 0),
        buffer_(batches.size(), nullptr) {
    for (unsigned t = 0; t < threads; ++t) {
      try {
        threads_.emplace_back([this] { run(); });
      } catch (const std::system_error& e) {
        if (!threads_.empty()) break;  // the readers running share the work
        throw Error(ErrorCode::kRemapDevice, Stage::kRemap,
                    std::string("cannot start a reader thread for the upload: ") + e.what());
      }
    }
  }
  ~Readers() {
    {
      const std::lock_guard lock(mutex_);
      stop_ = true;
    }
    work_.notify_all();
    for (auto& t : threads_) t.join();
  }
  Readers(const Readers&) = delete;
  Readers& operator=(const Readers&) = delete;

  void publish(std::size_t b, std::uint8_t* buffer) {
    {
      const std::lock_guard lock(mutex_);
      buffer_[b] = buffer;
      remaining_[b] = batches_[b].ops.size();
      open_.push_back(b);
    }
    work_.notify_all();
  }
  // Waits until batch b is in its buffer; rethrows a reader's error.
  void wait(std::size_t b) {
    std::unique_lock lock(mutex_);
    done_.wait(lock, [&] { return remaining_[b] == 0 || error_.has_value(); });
    if (error_) throw *error_;
  }

 private:
  void run() {
    std::unique_lock lock(mutex_);
    for (;;) {
      work_.wait(lock, [&] { return stop_ || !open_.empty(); });
      if (stop_) return;
      const std::size_t b = open_.front();
      const Op& op = batches_[b].ops[next_[b]++];
      if (next_[b] == batches_[b].ops.size()) open_.pop_front();
      std::uint8_t* buffer = buffer_[b];
      lock.unlock();
      std::optional<Error> failed;
      try {
        fill(op, buffer);
      } catch (const Error& e) {
        failed = e;
      } catch (const std::bad_alloc&) {  // a reader's own buffer (a URL source's group, remote_reads.h)
        failed = Error(ErrorCode::kRemapOutOfMemory, Stage::kRemap,
                       "out of host memory while reading " + jobs_[op.job].who + " for the upload");
      }
      lock.lock();
      if (failed && !error_) {
        error_ = std::move(failed);
        open_.clear();
        done_.notify_all();
      }
      if (--remaining_[b] == 0) done_.notify_all();
    }
  }

  void fill(const Op& op, std::uint8_t* buffer) const {
    const UploadJob& job = jobs_[op.job];
    std::uint8_t* dst = buffer + op.staging_off;
    if (job.read) {
      job.read(op.src_off, op.n, dst);
      if (job.swap_unit > 1) maploc::detail::copy_swapped(dst, dst, static_cast<std::size_t>(op.n), job.swap_unit);
      return;
    }
    if (fd_ < 0 || job.file_offset < 0) {
      maploc::detail::copy_swapped(dst, job.source.data() + op.src_off, static_cast<std::size_t>(op.n), job.swap_unit);
      return;
    }
    const std::uint64_t at = static_cast<std::uint64_t>(job.file_offset) + op.src_off;
    for (std::uint64_t done = 0; done < op.n;) {
      const ssize_t got =
          ::pread(fd_, dst + done, static_cast<std::size_t>(op.n - done), static_cast<off_t>(at + done));
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) {
        throw Error(ErrorCode::kIoRead, Stage::kRemap,
                    "reading " + job.who + " from the checkpoint at offset " + std::to_string(at + done) + " failed: " +
                        (got < 0 ? std::string(std::strerror(errno)) : std::string("the file ends there (was it truncated?)")));
      }
      done += static_cast<std::uint64_t>(got);
    }
    if (job.swap_unit > 1) maploc::detail::copy_swapped(dst, dst, static_cast<std::size_t>(op.n), job.swap_unit);
  }

  std::span<const UploadJob> jobs_;
  const std::vector<Batch>& batches_;
  const int fd_;
  std::mutex mutex_;
  std::condition_variable work_, done_;
  std::deque<std::size_t> open_;
  std::vector<std::size_t> remaining_, next_;
  std::vector<std::uint8_t*> buffer_;
  std::optional<Error> error_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

std::string batch_who(std::span<const UploadJob> jobs, const Batch& b) {
  std::string out = jobs[b.first_job].who;
  if (b.jobs > 1) out += " (and " + std::to_string(b.jobs - 1) + " more storage(s) staged with it)";
  return out;
}

// Batches of all devices, interleaved one by one so that every device's copies run at once.
std::vector<Batch> all_batches(std::span<const UploadJob> jobs, std::uint64_t capacity, bool coalesce,
                               std::vector<int>* devices) {
  for (const auto& j : jobs) {
    if (j.size() > 0 && std::find(devices->begin(), devices->end(), j.device) == devices->end()) {
      devices->push_back(j.device);
    }
  }
  std::sort(devices->begin(), devices->end());
  std::vector<std::vector<Batch>> per_device;
  for (int d : *devices) {
    std::vector<std::size_t> order;
    for (std::size_t i = 0; i < jobs.size(); ++i) {
      if (jobs[i].device == d && jobs[i].size() > 0) order.push_back(i);
    }
    per_device.push_back(pack(jobs, order, d, capacity, coalesce));
  }
  std::vector<Batch> out;
  for (std::size_t round = 0;; ++round) {
    bool any = false;
    for (auto& batches : per_device) {
      if (round < batches.size()) {
        out.push_back(std::move(batches[round]));
        any = true;
      }
    }
    if (!any) return out;
  }
}

}  // namespace

void upload(DeviceBackend& backend, std::span<const UploadJob> jobs, int fd, const CudaOptions& options,
            Destinations destinations, maploc::detail::ProgressMeter* meter, const UploadHooks& hooks) {
  const std::uint64_t capacity = std::max<std::uint64_t>(options.staging_bytes / 64 * 64, 64);
  std::vector<int> devices;
  // Gaps between destinations are sent over only inside maploc's own arena, where they are padding.
  const bool coalesce = destinations == Destinations::kOwnArena || hooks.coalesce_anywhere;
  const std::vector<Batch> batches = all_batches(jobs, capacity, coalesce, &devices);
  if (batches.empty()) return;
  const DeviceGuard guard(&backend);
  // The ring is made in the context of a device the upload uses, never in a context of the
  // caller's current device that would otherwise not exist.
  check_device(backend, backend.set_device(devices.front()), "selecting cuda:" + std::to_string(devices.front()));
  const std::size_t ring_size = std::clamp<std::size_t>(options.staging_buffers, 1, 64);
  // Destroyed in reverse: the readers stop, the streams drain, then the ring goes back.
  const StagingCache staging(backend, ring_size, capacity);
  const Ring& ring = staging.ring();
  Lanes lanes(backend, devices, ring.size(), options);
  Readers readers(jobs, batches, fd, std::clamp(options.reader_threads, 1u, 64u));

  // last[k]: the batch whose copies last left buffer k (SIZE_MAX: none).
  std::vector<std::size_t> last(ring.size(), SIZE_MAX);
  // Waits until buffer k's last copies are done; a failure there is that batch's
  // (every earlier batch of its device was confirmed before, in order).
  auto settle = [&](std::size_t k) {
    const std::size_t j = last[k];
    if (j == SIZE_MAX) return;
    last[k] = SIZE_MAX;
    const Batch& b = batches[j];
    check_device(backend, backend.event_sync(lanes.of(b.device).events[k]),
                 "copying " + batch_who(jobs, b) + " to cuda:" + std::to_string(b.device));
  };
  // Batches are published `ahead` in advance. A buffer is settled (its copies waited for) only when
  // it is filled again, after the next batch's copies were enqueued: every device always has a
  // batch queued behind the one it is copying, so its link never waits for the host, and the
  // devices of interleaved batches copy at once. One buffer cannot overlap anything.
  const std::size_t ahead = std::max<std::size_t>(ring.size() - 1, 1);
  auto publish = [&](std::size_t p) {
    const std::size_t k = p % ring.size();
    if (!hooks.refill_before_copy_done) settle(k);
    readers.publish(p, ring.buffer(k));
  };
  std::size_t published = 0;
  for (; published < batches.size() && published < ahead; ++published) publish(published);
  for (std::size_t s = 0; s < batches.size(); ++s) {
    readers.wait(s);
    const Batch& b = batches[s];
    const std::size_t k = s % ring.size();
    auto& lane = lanes.of(b.device);
    const std::string where = "cuda:" + std::to_string(b.device);
    check_device(backend, backend.set_device(b.device), "selecting " + where);
    for (const Transfer& t : b.transfers) {
      check_device(backend,
                   backend.copy_async(t.dst, ring.buffer(k) + t.staging_off, t.n,
                                      DeviceBackend::CopyKind::kHostToDevice, lane.stream),
                   "copying " + jobs[t.job].who + " to " + where);
    }
    check_device(backend, backend.event_record(lane.events[k], lane.stream), "recording a copy event on " + where);
    last[k] = s;
    if (meter != nullptr) meter->add(b.staged);
    if (published < batches.size()) publish(published++);
  }
  // The last batches, oldest first.
  std::vector<std::size_t> order(ring.size());
  for (std::size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return last[a] + 1 < last[b] + 1; });
  for (std::size_t k : order) settle(k);
}

void download(DeviceBackend& backend, std::span<const DownloadJob> jobs, const CudaOptions& options) {
  const std::uint64_t capacity = std::max<std::uint64_t>(options.staging_bytes / 64 * 64, 64);
  std::vector<int> devices;
  for (const auto& j : jobs) {
    if (j.n > 0 && std::find(devices.begin(), devices.end(), j.device) == devices.end()) devices.push_back(j.device);
  }
  if (devices.empty()) return;
  const DeviceGuard guard(&backend);
  check_device(backend, backend.set_device(devices.front()), "selecting cuda:" + std::to_string(devices.front()));
  const StagingCache staging(backend, std::clamp<std::size_t>(options.staging_buffers, 1, 64), capacity);
  const Ring& ring = staging.ring();
  Lanes lanes(backend, devices, ring.size(), options);

  // One piece of a job: n bytes at src to dst, through the staging buffer at staging_off.
  struct Piece {
    const std::uint8_t* src;
    std::uint8_t* dst;
    std::uint64_t staging_off;
    std::uint64_t n;
    std::size_t job;
  };
  struct InFlight {
    int device = -1;  // -1: the buffer is free
    std::vector<Piece> pieces;
  };
  std::vector<InFlight> flight(ring.size());
  auto what = [&](const Piece& p) { return "copying " + jobs[p.job].who + " back from cuda:" + std::to_string(jobs[p.job].device); };
  // Waits for buffer k's copies, then moves their bytes to their destinations.
  auto drain = [&](std::size_t k) {
    InFlight& f = flight[k];
    if (f.device < 0) return;
    check_device(backend, backend.event_sync(lanes.of(f.device).events[k]), what(f.pieces.front()));
    for (const Piece& p : f.pieces) std::memcpy(p.dst, ring.buffer(k) + p.staging_off, static_cast<std::size_t>(p.n));
    f.device = -1;
    f.pieces.clear();
  };
  std::size_t k = 0;
  int device = -1;
  std::vector<Piece> batch;
  std::uint64_t used = 0;
  auto flush = [&] {
    if (batch.empty()) return;
    drain(k);
    auto& lane = lanes.of(device);
    check_device(backend, backend.set_device(device), "selecting cuda:" + std::to_string(device));
    for (const Piece& p : batch) {
      check_device(backend,
                   backend.copy_async(ring.buffer(k) + p.staging_off, p.src, p.n, DeviceBackend::CopyKind::kDeviceToHost,
                                      lane.stream),
                   what(p));
    }
    check_device(backend, backend.event_record(lane.events[k], lane.stream),
                 "recording a copy event on cuda:" + std::to_string(device));
    flight[k].device = device;
    flight[k].pieces.swap(batch);
    batch.clear();
    used = 0;
    k = (k + 1) % ring.size();
  };
  for (std::size_t j = 0; j < jobs.size(); ++j) {
    const DownloadJob& job = jobs[j];
    if (job.device != device) flush();
    device = job.device;
    for (std::uint64_t done = 0; done < job.n;) {
      if (used == capacity) flush();
      const std::uint64_t n = std::min(job.n - done, capacity - used);
      batch.push_back({static_cast<const std::uint8_t*>(job.src) + done, job.dst + done, used, n, j});
      used = (used + n + 63) / 64 * 64;  // each piece 64-byte aligned in staging
      if (used > capacity) used = capacity;
      done += n;
    }
  }
  flush();
  for (std::size_t i = 0; i < ring.size(); ++i) drain((k + i) % ring.size());  // oldest first
}

}  // namespace maploc::remap::detail
