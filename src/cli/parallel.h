// parallel.h - run one job per index over the host's threads (hashing many storages).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace maploc::cli {

/// Calls job(i) for every i < count, spread over up to 8 host threads that
/// take the next index as they finish one; returns when all are done. The
/// first exception a job throws is rethrown here once every thread stopped.
template <class Job>
void parallel_for(std::size_t count, Job&& job) {
  const std::size_t threads = std::min<std::size_t>({count, std::max(1u, std::thread::hardware_concurrency()), 8});
  if (threads <= 1) {
    for (std::size_t i = 0; i < count; ++i) job(i);
    return;
  }
  std::atomic<std::size_t> next{0};
  std::exception_ptr error;
  std::mutex error_mutex;
  auto worker = [&] {
    for (std::size_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < count;) {
      try {
        job(i);
      } catch (...) {
        const std::lock_guard lock(error_mutex);
        if (!error) error = std::current_exception();
        next.store(count, std::memory_order_relaxed);
      }
    }
  };
  {
    std::vector<std::jthread> pool;
    for (std::size_t t = 1; t < threads; ++t) pool.emplace_back(worker);
    worker();
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace maploc::cli
