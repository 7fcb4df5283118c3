// memory.cpp - device allocations inside the PROT_NONE reservation, pinned buffers, violations.
#include "standin_internal.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

namespace maploc::standin {

std::string describe(const void* p) {
  char text[32];
  std::snprintf(text, sizeof text, "%p", p);
  return text;
}

int device_of_address(const State& s, uptr p) {
  for (std::size_t d = 0; d < s.devices.size(); ++d) {
    const Device& device = s.devices[d];
    if (p >= device.base && p - device.base < device.region) return static_cast<int>(d);
  }
  return -1;
}

const Allocation* allocation_containing(const State& s, uptr p) {
  auto it = s.allocations.upper_bound(p);
  if (it == s.allocations.begin()) return nullptr;
  --it;
  const Allocation& a = it->second;
  return p - a.base < a.size ? &a : nullptr;
}

const Pinned* pinned_containing(const State& s, uptr p) {
  auto it = s.pinned.upper_bound(p);
  if (it == s.pinned.begin()) return nullptr;
  --it;
  const Pinned& b = it->second;
  return p - b.base < b.size ? &b : nullptr;
}

unsigned char* shadow_of(const State& s, uptr device_address) {
  return s.shadow + (device_address - reinterpret_cast<uptr>(s.reservation));
}

Error device_malloc(State& s, int device, std::size_t size, void** out) {
  Device& d = s.devices[static_cast<std::size_t>(device)];
  const std::size_t rounded = (size + 255) / 256 * 256;
  if (rounded < size || rounded > d.capacity - d.used) return cuda::kErrorMemoryAllocation;
  // First fit over the device's region, in address order.
  uptr candidate = d.base;
  const uptr limit = d.base + d.capacity;
  for (auto it = s.allocations.lower_bound(d.base); it != s.allocations.end() && it->first < limit; ++it) {
    if (it->first - candidate >= rounded) break;
    candidate = it->first + it->second.rounded;
  }
  if (candidate + rounded > limit) return cuda::kErrorMemoryAllocation;  // fragmented
  s.allocations[candidate] = Allocation{s.next_alloc++, device, candidate, size, rounded};
  d.used += rounded;
  *out = reinterpret_cast<void*>(candidate);
  return 0;
}

Error device_free(State& s, uptr p) {
  auto it = s.allocations.find(p);
  if (it == s.allocations.end()) return cuda::kErrorInvalidValue;
  Allocation a = it->second;
  s.allocations.erase(it);
  s.devices[static_cast<std::size_t>(a.device)].used -= a.rounded;
  // Give whole pages back (they read as zero when reused); partial pages keep their bytes.
  const uptr page = static_cast<uptr>(::sysconf(_SC_PAGESIZE));
  const uptr offset = a.base - reinterpret_cast<uptr>(s.reservation);
  const uptr first = (offset + page - 1) / page * page, last = (offset + a.rounded) / page * page;
  if (last > first)
    (void)::fallocate(s.memfd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(first),
                      static_cast<off_t>(last - first));
  for (auto r = s.protected_ranges.begin(); r != s.protected_ranges.end();)
    r = r->first >= a.base && r->first < a.base + a.rounded ? s.protected_ranges.erase(r) : r + 1;
  return 0;
}

std::string check_device_range(const State& s, uptr p, std::size_t n, const Allocation** found) {
  const Allocation* a = allocation_containing(s, p);
  if (found) *found = a;
  if (!a) {
    int device = device_of_address(s, p);
    return "device address " + describe(reinterpret_cast<void*>(p)) +
           (device < 0 ? " is not device memory" : " is not inside a live allocation of device " + std::to_string(device));
  }
  if (n > a->size - (p - a->base)) {
    std::string text = "device range " + describe(reinterpret_cast<void*>(p)) + " + " + std::to_string(n) +
                       " runs past the end of its allocation " + describe(reinterpret_cast<void*>(a->base)) + " (" +
                       std::to_string(a->size) + " bytes)";
    auto next = s.allocations.upper_bound(a->base);
    if (next != s.allocations.end() && next->first < p + n)
      text += ", into another allocation";
    return text;
  }
  return {};
}

u64 checksum(const unsigned char* p, std::size_t n) {
  u64 h = 0xcbf29ce484222325ull;
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    u64 word;
    std::memcpy(&word, p + i, 8);
    h = (h ^ word) * 0x100000001b3ull;
    h ^= h >> 29;
  }
  for (; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

void add_violation(State& s, std::string text) { s.violations.push_back(std::move(text)); }

}  // namespace maploc::standin
