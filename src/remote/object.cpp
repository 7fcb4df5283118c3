// object.cpp - remote::Object: the first request, the sparse buffer, ensure() with requests in flight.
#include "maploc/remote/object.h"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <mutex>
#include <thread>

#include "http.h"
#include "intervals.h"

namespace maploc::remote {
namespace {

struct Mapping {
  void* addr = nullptr;
  std::size_t size = 0;
  ~Mapping() {
    if (addr != nullptr) ::munmap(addr, size);
  }
};

// One request: a range of the object, read into place or (when it spans present bytes) a scratch buffer.
struct Chunk {
  std::uint64_t offset = 0;
  std::uint64_t length = 0;
  bool scratch = false;
};

unsigned parallel_of(const Options& o) {
  if (o.parallel != 0) return o.parallel;
  if (const char* v = std::getenv("MAPLOC_REMOTE_PARALLEL")) {
    const long n = std::strtol(v, nullptr, 10);
    if (n > 0) return static_cast<unsigned>(std::min(n, 64L));
  }
  return 8;
}

// A time bound: the field, else its environment variable (a positive decimal), else `fallback`.
std::uint64_t bound_of(std::uint64_t field, const char* variable, std::uint64_t fallback) {
  if (field != 0) return field;
  if (const char* v = std::getenv(variable)) {
    char* end = nullptr;
    const unsigned long long n = std::strtoull(v, &end, 10);
    if (end != v && *end == '\0' && v[0] != '-' && n > 0) return n;
  }
  return fallback;
}

// Options::connect_timeout_ms ... retry_budget_ms resolved (docs/remote.md, "Time bounds").
void resolve_bounds(Options& o) {
  o.connect_timeout_ms = bound_of(o.connect_timeout_ms, "MAPLOC_REMOTE_CONNECT_TIMEOUT_MS", 10'000);
  o.timeout_ms = bound_of(o.timeout_ms, "MAPLOC_REMOTE_TIMEOUT_MS", 30'000);
  o.timeout_rate = bound_of(o.timeout_rate, "MAPLOC_REMOTE_TIMEOUT_RATE", 64u << 10);
  o.low_speed_bytes = bound_of(o.low_speed_bytes, "MAPLOC_REMOTE_LOW_SPEED_BYTES", 1024);
  o.low_speed_seconds = bound_of(o.low_speed_seconds, "MAPLOC_REMOTE_LOW_SPEED_SECONDS", 30);
  o.error_body_bytes = bound_of(o.error_body_bytes, "MAPLOC_REMOTE_ERROR_BODY_BYTES", 64u << 10);
  o.retry_budget_ms = bound_of(o.retry_budget_ms, "MAPLOC_REMOTE_RETRY_BUDGET_MS", 120'000);
}

// Options::ca_file resolved (the option, else the environment); a file that cannot be read is an
// error naming it and where it was named, before any request.
void resolve_ca(Options& o, const std::string& url, const std::string& display) {
  const CaFile ca = ca_file_of(o.ca_file, url.rfind("s3://", 0) == 0);
  o.ca_file = ca.path;
  if (ca.path.empty()) return;
  if (!std::ifstream(ca.path, std::ios::binary).good()) {
    throw Error(ErrorCode::kRemoteBadUrl, Stage::kIo,
                "the CA file '" + ca.path + "' (from " + ca.from + ") cannot be read: " + std::strerror(errno),
                std::nullopt, display);
  }
}

}  // namespace

struct Object::Impl {
  Target target;
  Options options;
  Pinned pinned;
  Bytes bytes;
  std::uint8_t* base = nullptr;

  mutable std::mutex fetch_mutex;   // one ensure() fetches at a time (its requests run in parallel)
  mutable std::mutex state_mutex;   // present, pool
  mutable Intervals present;
  mutable std::vector<std::unique_ptr<Connection>> pool;
  mutable std::atomic<std::uint64_t> bytes_read{0}, requests{0}, retries{0};
  mutable std::atomic<bool> read_in_full{false};

  std::unique_ptr<Connection> take() const {
    std::lock_guard lock(state_mutex);
    if (pool.empty()) return std::make_unique<Connection>(target, options);
    auto c = std::move(pool.back());
    pool.pop_back();
    return c;
  }
  void give(std::unique_ptr<Connection> c) const {
    std::lock_guard lock(state_mutex);
    pool.push_back(std::move(c));
  }

  // Runs `attempt` until it succeeds or its retries are spent: Options::retries, and retries start
  // only within Options::retry_budget_ms of the first attempt, each cut to what is left of it
  // (then an Error naming the URL).
  template <class F>
  void with_retries(F attempt) const {
    const auto budget_end = std::chrono::steady_clock::now() + std::chrono::milliseconds(options.retry_budget_ms);
    for (unsigned n = 0;; ++n) {
      Tally tally;
      if (n > 0) tally.deadline = budget_end;
      try {
        attempt(tally);
        bytes_read += tally.bytes;
        requests += tally.requests;
        return;
      } catch (const Retryable& r) {
        bytes_read += tally.bytes;
        requests += tally.requests;
        const auto backoff = std::chrono::milliseconds(std::min(50u << std::min(n, 6u), 2000u));
        if (n >= options.retries || std::chrono::steady_clock::now() + backoff >= budget_end) {
          throw Error(r.code, Stage::kIo,
                      r.message + " (after " + std::to_string(n + 1) + " attempts" +
                          (n >= options.retries ? "" : ", the retry budget of " +
                                                           std::to_string(options.retry_budget_ms) + " ms spent") + ")",
                      std::nullopt, target.display);
        }
        ++retries;
        std::this_thread::sleep_for(backoff);
      } catch (...) {
        bytes_read += tally.bytes;
        requests += tally.requests;
        throw;
      }
    }
  }

  // The 2 MiB pages wholly inside a chunk about to be filled as huge pages (fewer first-touch
  // faults); never pages reaching outside it, which a sparse read would leave mostly empty.
  void huge_pages(const Chunk& r) const {
    constexpr std::uint64_t kHuge = 2u << 20;
    const auto at = reinterpret_cast<std::uintptr_t>(base + r.offset);
    const std::uintptr_t first = (at + kHuge - 1) / kHuge * kHuge, last = (at + r.length) / kHuge * kHuge;
    if (last > first) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);
  }

  void fetch(const Chunk& r) const {
    auto conn = take();
    std::vector<std::uint8_t> scratch(r.scratch ? r.length : 0);
    std::uint8_t* dest = r.scratch ? scratch.data() : base + r.offset;
    if (!r.scratch) huge_pages(r);
    with_retries([&](Tally& t) { conn->get(r.offset, r.length, dest, pinned, t); });
    give(std::move(conn));
    std::lock_guard lock(state_mutex);
    if (r.scratch) {
      for (const ByteRange& gap : present.missing(r.offset, r.offset + r.length)) {
        std::memcpy(base + gap.offset, scratch.data() + (gap.offset - r.offset), gap.length);
      }
    }
    present.add(r.offset, r.offset + r.length);
  }
};

Object::Object(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Object::~Object() = default;

std::shared_ptr<Object> Object::open(const std::string& url, const Options& options) {
  auto impl = std::make_unique<Impl>();
  impl->target = resolve_target(url);
  impl->options = options;
  impl->options.parallel = parallel_of(options);
  impl->options.chunk_bytes = std::max<std::uint64_t>(options.chunk_bytes, 4096);
  resolve_bounds(impl->options);
  resolve_ca(impl->options, url, impl->target.display);
  Probe probe;
  {
    Connection conn(impl->target, impl->options);
    impl->with_retries([&](Tally& t) { probe = conn.probe(options.tail_bytes, options.whole_object_bytes, t); });
  }
  impl->pinned = probe.pinned;
  const std::uint64_t size = probe.pinned.size;
  if (size > 0) {
    void* addr = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (addr == MAP_FAILED) {
      throw Error(ErrorCode::kLimitMemory, Stage::kIo,
                  "cannot reserve " + std::to_string(size) + " bytes of address space for the object: " +
                      std::strerror(errno),
                  std::nullopt, impl->target.display);
    }
    auto mapping = std::make_shared<Mapping>();
    mapping->addr = addr;
    mapping->size = size;
    impl->base = static_cast<std::uint8_t*>(addr);
    impl->bytes = Bytes(std::move(mapping), impl->base, size);
    std::memcpy(impl->base + probe.offset, probe.body.data(), probe.body.size());
    impl->present.add(probe.offset, probe.offset + probe.body.size());
  }
  return std::shared_ptr<Object>(new Object(std::move(impl)));
}

std::uint64_t Object::size() const noexcept { return impl_->pinned.size; }
const Bytes& Object::bytes() const noexcept { return impl_->bytes; }

MappedFile Object::file() const {
  MappedFile f = MappedFile::from_bytes(impl_->bytes, impl_->target.display);
  f.source = shared_from_this();
  return f;
}

bool Object::complete() const {
  std::lock_guard lock(impl_->state_mutex);
  return impl_->present.covers(0, impl_->pinned.size);
}

void Object::set_read_in_full() const { impl_->read_in_full = true; }

void Object::ensure(std::span<const ByteRange> ranges) const { ensure(ranges, impl_->options.merge_gap); }

void Object::ensure(std::span<const ByteRange> ranges, std::uint64_t merge_gap) const {
  const Impl& m = *impl_;
  const std::uint64_t size = m.pinned.size;
  std::lock_guard fetching(m.fetch_mutex);
  // The ranges asked, clipped to the object, sorted and merged.
  std::vector<ByteRange> asked;
  for (const ByteRange& r : ranges) {
    if (r.offset < size && r.length != 0) asked.push_back({r.offset, std::min(r.length, size - r.offset)});
  }
  std::sort(asked.begin(), asked.end(), [](const ByteRange& a, const ByteRange& b) { return a.offset < b.offset; });
  // What is missing of them; pieces closer than merge_gap become one request (its present bytes
  // are read into a scratch buffer and dropped: bytes already handed out are never written again).
  std::vector<Chunk> requests;
  {
    std::lock_guard lock(m.state_mutex);
    std::uint64_t done = 0;
    for (const ByteRange& r : asked) {
      const std::uint64_t begin = std::max(r.offset, done), end = r.offset + r.length;
      if (begin >= end) continue;
      done = end;
      for (const ByteRange& gap : m.present.missing(begin, end)) {
        if (!requests.empty() && gap.offset <= requests.back().offset + requests.back().length + merge_gap) {
          requests.back().length = gap.offset + gap.length - requests.back().offset;
          requests.back().scratch = true;
        } else {
          requests.push_back({gap.offset, gap.length, false});
        }
      }
    }
  }
  std::vector<Chunk> chunks;
  for (const Chunk& r : requests) {
    for (std::uint64_t at = r.offset; at < r.offset + r.length; at += m.options.chunk_bytes) {
      chunks.push_back({at, std::min(m.options.chunk_bytes, r.offset + r.length - at), r.scratch});
    }
  }
  if (chunks.empty()) return;
  const std::size_t workers = std::min<std::size_t>(m.options.parallel, chunks.size());
  if (workers <= 1) {
    for (const Chunk& c : chunks) m.fetch(c);
    return;
  }
  std::atomic<std::size_t> next{0};
  std::atomic<bool> stop{false};
  std::exception_ptr failure;
  std::mutex failure_mutex;
  auto work = [&] {
    for (std::size_t i; !stop && (i = next++) < chunks.size();) {
      try {
        m.fetch(chunks[i]);
      } catch (...) {
        std::lock_guard lock(failure_mutex);
        if (!failure) failure = std::current_exception();
        stop = true;
      }
    }
  };
  std::vector<std::thread> threads;
  threads.reserve(workers - 1);
  for (std::size_t w = 1; w < workers; ++w) threads.emplace_back(work);
  work();
  for (auto& t : threads) t.join();
  if (failure) std::rethrow_exception(failure);
}

void Object::read(std::uint64_t offset, std::uint64_t length, std::uint8_t* out) const {
  const Impl& m = *impl_;
  if (length == 0) return;
  if (offset > m.pinned.size || length > m.pinned.size - offset) {
    throw Error(ErrorCode::kInvalidArgument, Stage::kIo,
                "bytes " + std::to_string(offset) + "+" + std::to_string(length) + " lie beyond the object's " +
                    std::to_string(m.pinned.size) + " bytes",
                std::nullopt, m.target.display);
  }
  bool present = false;
  {
    std::lock_guard lock(m.state_mutex);
    present = m.present.covers(offset, offset + length);
  }
  if (present) {  // bytes present never change again
    std::memcpy(out, m.base + offset, length);
    return;
  }
  auto conn = m.take();
  m.with_retries([&](Tally& t) { conn->get(offset, length, out, m.pinned, t); });
  m.give(std::move(conn));
}

unsigned Object::read_parallel() const { return impl_->options.parallel; }

RemoteTransfer Object::transfer() const {
  RemoteTransfer t;
  t.url = impl_->target.display;
  t.object_bytes = impl_->pinned.size;
  t.bytes_read = impl_->bytes_read;
  t.requests = impl_->requests;
  t.retries = impl_->retries;
  t.read_in_full = impl_->read_in_full;
  return t;
}

}  // namespace maploc::remote
