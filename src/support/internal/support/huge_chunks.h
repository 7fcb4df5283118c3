// huge_chunks.h - memory in transparent huge pages (internal): fresh mappings
// (remap's owned copies), a memory_resource for large, short-lived arenas
// (the pickle value tree) and advice for large reserved tables. From 2 MiB
// up: one first-touch fault per 2 MiB instead of 512 (docs/performance.md,
// "Why the code is shaped so").
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <memory_resource>
#include <new>

namespace maploc::detail {

/// A transparent huge page: buffers from this size up are worth a mapping of their own.
inline constexpr std::size_t kHugePage = std::size_t{2} << 20;

/// A fresh anonymous read-write mapping of `bytes`, asked to use transparent
/// huge pages (advice only: ignored where THP is off); nullptr when the
/// kernel refuses. Free it with munmap(p, bytes).
inline void* map_huge(std::size_t bytes) noexcept {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  ::madvise(p, bytes, MADV_HUGEPAGE);
  return p;
}

class HugeChunks final : public std::pmr::memory_resource {
 private:
  void* do_allocate(std::size_t bytes, std::size_t alignment) override {
    if (bytes < kHugePage) return std::pmr::new_delete_resource()->allocate(bytes, alignment);
    void* p = map_huge(bytes);
    if (p == nullptr) throw std::bad_alloc();
    return p;  // alignment: pages satisfy any fundamental alignment
  }

  void do_deallocate(void* p, std::size_t bytes, std::size_t alignment) override {
    if (bytes < kHugePage) {
      std::pmr::new_delete_resource()->deallocate(p, bytes, alignment);
    } else {
      ::munmap(p, bytes);
    }
  }

  bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override { return this == &other; }
};

/// Asks for transparent huge pages on the whole 2 MiB blocks inside a buffer
/// that is not yet touched (a large vector just reserved): its first touch
/// then faults once per 2 MiB, not once per 4 KiB. Advice only.
inline void prefer_huge_pages(const void* data, std::size_t bytes) noexcept {
  if (bytes < 2 * kHugePage) return;
  const auto begin = reinterpret_cast<std::uintptr_t>(data);
  const std::uintptr_t lo = (begin + kHugePage - 1) & ~(std::uintptr_t{kHugePage} - 1);
  const std::uintptr_t hi = (begin + bytes) & ~(std::uintptr_t{kHugePage} - 1);
  if (hi > lo) ::madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_HUGEPAGE);
}

}  // namespace maploc::detail
